"""Speculative decoding's acceptance, between what a spec takes and what vLLM reports.

A serving spec's ``engine.speculative.per_token_acceptance`` is α, the
probability that a draft token is kept given that the ones before it were.
vLLM's metrics report the *mean acceptance length* instead: the tokens a
verification yields, (1 − α^(k+1)) / (1 − α) for k drafts (Leviathan et al.
2023, arXiv 2211.17192). These two functions convert between them, so a
length read from a vLLM log becomes a spec's α.

>>> round(acceptance_length(0.7, 4), 4)
2.7731
>>> round(per_token_acceptance(2.7731, 4), 3)
0.7
"""

from __future__ import annotations


def acceptance_length(per_token_acceptance: float, num_speculative_tokens: int) -> float:
    """The mean tokens a verification of ``num_speculative_tokens`` drafts
    yields when each is kept with probability ``per_token_acceptance`` if
    the ones before it were: 1 + α + α² + … + α^k."""
    a, k = per_token_acceptance, num_speculative_tokens
    if not 0 <= a <= 1:
        raise ValueError(f"per_token_acceptance must be in [0, 1], got {a}")
    if k < 1:
        raise ValueError(f"num_speculative_tokens must be >= 1, got {k}")
    return float(sum(a**i for i in range(k + 1)))


def per_token_acceptance(mean_acceptance_length: float, num_speculative_tokens: int) -> float:
    """The α whose mean acceptance length over ``num_speculative_tokens``
    drafts is ``mean_acceptance_length`` (vLLM's metric, between 1 and
    k + 1), found by bisection (the length grows with α)."""
    k, tau = num_speculative_tokens, mean_acceptance_length
    if k < 1:
        raise ValueError(f"num_speculative_tokens must be >= 1, got {k}")
    if not 1 <= tau <= k + 1:
        raise ValueError(f"mean_acceptance_length must be in [1, {k + 1}] for {k} drafts, got {tau}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if acceptance_length(mid, k) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
