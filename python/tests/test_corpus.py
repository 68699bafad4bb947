"""The reliability corpus (corpus.py): 2,200 seeded mutated and extreme specs of every kind."""

from corpus import GOOD, cases, run_cases, summarize

SEED = 15
CASES = 2200


def test_corpus_no_crash_hang_foreign_exception_or_nan():
    specs = cases(SEED, CASES)
    results = run_cases(specs, workers=2)
    counts = summarize(specs, results)
    bad = [(i, r) for i, r in enumerate(results) if r["outcome"] not in GOOD]
    lines = [f"case {i}: {r['outcome']}: {r.get('detail', '')[:300]}\n  reproduce: python tests/corpus.py --seed {SEED} --case {i}"
             for i, r in bad[:10]]
    assert not bad, f"{counts}\n" + "\n".join(lines)
    # not vacuous: valid runs, rejected specs and interrupted long runs all occur
    assert counts.get("ok", 0) > CASES // 20
    assert counts.get("spec_error", 0) > CASES // 2
    assert sum(counts.values()) == CASES


def test_generator_is_seeded():
    assert cases(3, 50) == cases(3, 50)
    assert cases(3, 50) != cases(4, 50)
