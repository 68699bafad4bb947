"""Search the parallel layouts of a training job."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

import pyarrow as pa

from .api import run
from .errors import SpecError


def search_parallel(
    model: Union[str, Mapping[str, Any]],
    cluster: Union[str, Mapping[str, Any]],
    batch: int,
    *,
    gpu: Union[str, Mapping[str, Any]] = "a100-80gb-sxm",
    nodes: Optional[int] = None,
    seq_len: int = 2048,
    dtype: str = "bf16",
    tp: Optional[Sequence[int]] = None,
    pp: Optional[Sequence[int]] = None,
    cp: Optional[Sequence[int]] = None,
    micro_batch: Optional[Sequence[int]] = None,
    recompute: Optional[Sequence[str]] = None,
    zero: Optional[Sequence[int]] = None,
    ep: Optional[Sequence[int]] = None,
    expert_tp: Optional[Sequence[int]] = None,
    keep: int = 10,
    progress: bool = True,
    **spec: Any,
) -> pa.Table:
    """Rank the parallel layouts (tp, pp, dp, cp, ep, expert_tp, micro-batch,
    recompute, zero) of ``model`` on ``cluster`` for a global batch of
    ``batch`` sequences.

    ``cluster`` is a cluster spec dict, or a preset name ("dgx-a100") scaled
    to ``nodes`` nodes (default 1); ``nodes`` also sets a dict's node count
    where the dict gives none, and one that contradicts it is a SpecError. Every GPU is used: dp = GPUs / (tp·cp·pp), ``cp``
    listing the context-parallel degrees (default ``[1]``). Returns the
    ``configs`` table: simulated layouts first, fastest first (``rank`` 1),
    then the others with ``status`` (bounded, dominated, does_not_fit,
    invalid) and a ``reason``. With ``keep = k`` the k fastest are exact and
    layouts whose lower bound cannot beat the k-th are not simulated; 0
    simulates every layout that fits. Extra keyword arguments go into the
    spec (e.g. ``unfused_attention=True``).

    For a mixture-of-experts model, ``ep`` lists the expert-parallel degrees
    (default every power of two up to the experts) and ``expert_tp`` the
    expert tensor-parallel degrees, 0 standing for each layout's tp
    (default ``[0, 1]``: expert TP = tp, then 1). The ``expert_tp`` column
    is tp for a dense model.

    >>> t = search_parallel({"preset": "gpt-22b", "layers": 4}, "dgx-a100", 8,
    ...                     seq_len=512, tp=[4, 8], micro_batch=[1], progress=False)
    >>> t.column("status")[0].as_py()
    'simulated'
    """
    if isinstance(cluster, str):
        cluster = {"preset": cluster, "nodes": 1 if nodes is None else nodes}
    elif nodes is not None:
        given = cluster.get("nodes")
        if given is not None and given != nodes:
            msg = f"search_parallel got nodes={nodes} and a cluster with \"nodes\": {given}; give one"
            raise SpecError(msg, [("cluster.nodes", msg)])
        cluster = {**cluster, "nodes": nodes}
    doc: dict[str, Any] = {"kind": "parallel_search", "model": model, "gpu": gpu if isinstance(gpu, str) else dict(gpu), "cluster": dict(cluster),
                           "global_batch": batch, "seq_len": seq_len, "dtype": dtype, "keep": keep}
    for key, value in (("tp", tp), ("pp", pp), ("cp", cp), ("micro_batch", micro_batch), ("recompute", recompute), ("zero", zero),
                       ("ep", ep), ("expert_tp", expert_tp)):
        if value is not None:
            doc[key] = list(value)
    doc.update(spec)
    return run(doc, progress=progress)["configs"]
