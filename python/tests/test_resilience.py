"""fault_sweep through eidolon.run, and split into shards through eidolon.sweep (local and Dask)."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

import eidolon

# A 2-layer GPT-22B over two DGX A100 nodes: TP 8 in a node, DP 2 across.
BASE = {"model": {"preset": "gpt-22b", "layers": 2}, "gpu": "a100-80gb-sxm",
        "cluster": {"preset": "dgx-a100", "nodes": 2}, "parallel": {"tp": 8, "dp": 2, "global_batch": 4},
        "seq_len": 1024, "timeline_ranks": [-1]}


def spec(**extra):
    s = {"kind": "fault_sweep", "seed": 5, "training": BASE, "samples": 6,
         "link_failures": 1, "link_degradations": 1, "degraded_health": 0.2}
    s.update(extra)
    return s


def test_tables_and_summary():
    r = eidolon.run(spec(), progress=False)
    assert set(r.tables) >= {"samples", "links", "summary", "cables"}
    samples = r.to_pandas("samples")
    assert samples["sample"].tolist() == list(range(6))
    assert (samples.link_failures == 1).all() and (samples.link_degradations == 1).all()
    assert samples.step_time_s.isna().equals(samples.failed)
    s = r.to_pandas("summary").iloc[0]
    assert s.samples == 6
    assert s.failed_share == pytest.approx(samples.failed.mean())
    ran = samples.slowdown.dropna().to_numpy()
    if len(ran):
        assert s.slowdown_p50 == pytest.approx(np.quantile(ran, 0.5))
        assert s.slowdown_p90 == pytest.approx(np.quantile(ran, 0.9))
    assert samples[samples.failed].reason.str.len().gt(0).all()


def test_single_link_criticality():
    s = spec(mode="single_link", links="fabric", cables=4)
    del s["samples"], s["link_failures"], s["link_degradations"]  # sample mode's fields
    r = eidolon.run(s, progress=False)
    links = r.to_pandas("links")
    assert len(links) == 4
    assert len(r.to_pandas("samples")) == 8  # each cable degraded, then failed
    cables = r.to_pandas("cables")
    assert set(links.link) <= set(cables[cables.eligible].link)


def test_spec_error_names_the_base_field():
    bad = dict(BASE, parallel={"tp": 3})
    with pytest.raises(eidolon.SpecError, match=r"training\.parallel\.tp"):
        eidolon.run(spec(training=bad), progress=False)


def shards(n):
    return [spec(shards=n, shard=i) for i in range(n)]


def merged_samples(result):
    """The samples of a sharded sweep in sample order, without the sweep's columns, as pandas."""
    return result["samples"].drop_columns(["point", "shard"]).sort_by("sample").to_pandas()


def test_sharded_sweep_equals_one_run():
    whole = eidolon.run(spec(), progress=False)["samples"]
    local = eidolon.sweep(shards(3), executor=ThreadPoolExecutor(2), progress=False)
    assert local.to_pandas("points")["ok"].all()
    pd.testing.assert_frame_equal(merged_samples(local), whole.to_pandas())


def test_dask_sweep_gives_the_same_table_as_a_local_one():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            remote = eidolon.sweep(shards(2), executor=client.get_executor(), progress=False)
    local = eidolon.sweep(shards(2), executor=ThreadPoolExecutor(2), progress=False)
    assert remote["samples"].equals(local["samples"])
    pd.testing.assert_frame_equal(merged_samples(remote), eidolon.run(spec(), progress=False).to_pandas("samples"))
