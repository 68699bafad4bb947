"""Training, inference, parallel search and the Perfetto trace from Python."""

import json

import pytest

import eidolon
from eidolon.perfetto import trace_events

SMALL = {"preset": "gpt-22b", "layers": 4}
CLUSTER = {"preset": "dgx-a100", "nodes": 1}


def training(**parallel):
    return eidolon.run({"kind": "training", "model": SMALL, "gpu": "a100-80gb-sxm", "cluster": CLUSTER,
                        "parallel": parallel, "seq_len": 1024}, progress=False)


def test_training_tables_and_breakdown():
    r = training(tp=4, pp=2, global_batch=8, sequence_parallel=True, recompute="selective")
    assert list(r.tables) == ["summary", "ranks", "timeline", "memory"]
    s = r.to_pandas("summary").iloc[0]
    assert s.step_time_s == pytest.approx(s.compute_s + s.exposed_comm_s + s.bubble_s)
    assert 0 < s.mfu <= s.hfu < 1
    assert bool(s.fits)
    ranks = r.to_pandas("ranks")
    assert sorted(ranks["rank"]) == list(range(8))
    timeline = r.to_pandas("timeline")
    assert set(timeline["stream"]) >= {"compute", "tp", "pp"}
    assert (timeline["end_s"] >= timeline["start_s"]).all()
    memory = r.to_pandas("memory")
    total = memory[(memory.category == "total")]["bytes"].max()
    assert total == pytest.approx(s.memory_peak_bytes)


def test_bigger_batch_more_tokens():
    a = training(tp=8, global_batch=2).to_pandas("summary").iloc[0]
    b = training(tp=8, global_batch=8).to_pandas("summary").iloc[0]
    assert b.step_time_s > a.step_time_s
    assert b.tokens_per_s >= a.tokens_per_s * 0.999


def test_bad_layout_is_a_spec_error():
    with pytest.raises(eidolon.SpecError) as err:
        training(tp=3)
    assert "parallel.tp" in str(err.value)


def test_mxfp8_is_blackwells():
    spec = {"kind": "training", "model": SMALL, "gpu": "b200", "cluster": {"preset": "dgx-b200", "nodes": 1},
            "parallel": {"tp": 8}, "seq_len": 1024, "dtype": "fp8", "fp8_recipe": "mxfp8"}
    assert eidolon.run(spec, progress=False).to_pandas("summary").iloc[0].step_time_s > 0
    with pytest.raises(eidolon.SpecError, match=r"fp8_recipe: mxfp8.*\(b200, gb200, b300, gb300\), which h100-sxm lacks") as err:
        eidolon.run({**spec, "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1}}, progress=False)
    assert [p.path for p in err.value.problems] == ["fp8_recipe"]


def test_fp8_attention():
    """fp8_attention (Transformer Engine's fp8_dpa) shortens a long-sequence FP8 step on Blackwell; with BF16 math it
    is a SpecError naming the field."""
    spec = {"kind": "training", "model": SMALL, "gpu": "b200", "cluster": {"preset": "dgx-b200", "nodes": 1},
            "parallel": {"tp": 8}, "seq_len": 16384, "dtype": "fp8", "fp8_recipe": "mxfp8"}
    bf16_attention = eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]
    fp8_attention = eidolon.run({**spec, "fp8_attention": True}, progress=False).to_pandas("summary").iloc[0]
    assert 0 < fp8_attention.step_time_s < bf16_attention.step_time_s
    with pytest.raises(eidolon.SpecError, match=r"fp8_attention: applies to FP8 training only") as err:
        bf16 = {k: v for k, v in spec.items() if k != "fp8_recipe"}
        eidolon.run({**bf16, "dtype": "bf16", "fp8_attention": True}, progress=False)
    assert [p.path for p in err.value.problems] == ["fp8_attention"]


def test_blackwell_ultra_rack():
    """A GB300 NVL72 rack trains as a GB200 one with Blackwell Ultra's exponential rate: at a long sequence, where
    the attention's softmax weighs, the GB300 step is shorter than the same step on a GB300 with Blackwell's rate."""
    spec = {"kind": "training", "model": SMALL, "gpu": "gb300", "cluster": {"preset": "gb300-nvl72", "nodes": 1},
            "parallel": {"tp": 8}, "seq_len": 16384, "dtype": "bf16"}
    ultra = eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]
    blackwell_exp = {**spec, "gpu": {"preset": "gb300", "exp_per_clock_per_sm": 16}}
    plain = eidolon.run(blackwell_exp, progress=False).to_pandas("summary").iloc[0]
    assert ultra.gpus == 72
    assert 0 < ultra.step_time_s < plain.step_time_s


def test_tp_comm_overlap_hides_tensor_parallel_communication():
    plain = training(tp=8, global_batch=1, sequence_parallel=True)
    ring = training(tp=8, global_batch=1, sequence_parallel=True, tp_comm_overlap=True)
    a, b = plain.to_pandas("summary").iloc[0], ring.to_pandas("summary").iloc[0]
    assert b.exposed_comm_s < a.exposed_comm_s
    names = ring.to_pandas("timeline")["name"]
    assert names.str.contains(r"fwd\.attn\.all_gather\.ring\d").any()
    assert names.str.contains(r"fwd\.mlp\.down\.chunk3$").any()
    with pytest.raises(eidolon.SpecError, match="parallel.tp_comm_overlap"):
        training(tp=8, global_batch=1, tp_comm_overlap=True)


def test_inference_by_tp():
    def run(tp):
        return eidolon.run({"kind": "inference", "model": "llama2-7b", "gpu": "a100-80gb-sxm", "cluster": CLUSTER,
                            "tp": tp, "prompt_tokens": 128, "output_tokens": 16}, progress=False).to_pandas("summary").iloc[0]
    one, four = run(1), run(4)
    assert four.e2e_s < one.e2e_s
    assert one.ttft_s < one.e2e_s
    assert four.longest_prompt_tokens > one.longest_prompt_tokens > 0


def test_perfetto_trace(tmp_path):
    r = training(tp=4, pp=2, global_batch=4)
    path = r.to_perfetto(tmp_path / "step.json")
    assert eidolon.write_perfetto(r, tmp_path / "again.json").read_text() == path.read_text()
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == r["timeline"].num_rows
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rank 0", "rank 4"}  # first rank of each stage
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert trace_events(r["timeline"]) == events


def test_perfetto_trace_is_written_in_slices(tmp_path, monkeypatch):
    """The trace is written a slice of rows at a time; the slices join into
    the document json.dumps writes of the whole."""
    import eidolon.perfetto as perfetto

    r = training(tp=4, pp=2, global_batch=4)
    whole = {"traceEvents": trace_events(r), "displayTimeUnit": "ms", "otherData": {"generator": "eidolon", "time_unit_of_ts": "us"}}
    monkeypatch.setattr(perfetto, "_BATCH_ROWS", 7)
    assert r.to_perfetto(tmp_path / "sliced.json").read_text() == json.dumps(whole)


def test_search_parallel_ranks():
    t = eidolon.search_parallel(SMALL, "dgx-a100", 8, seq_len=512, tp=[2, 4, 8], micro_batch=[1, 2], progress=False).to_pandas()
    sim = t[t.status == "simulated"]
    assert len(sim) > 3
    assert list(sim["rank"]) == list(range(1, len(sim) + 1))
    assert sim["step_time_s"].is_monotonic_increasing
    assert (t[t.status != "simulated"]["reason"].str.len() > 0).all()
    assert (t["expert_tp"] == t["tp"]).all()  # a dense model's expert TP is its tp


def test_search_parallel_nodes_with_a_cluster_dict():
    # nodes scales a preset name and fills a dict that gives no node count;
    # a dict that says otherwise is refused rather than silently kept.
    t = eidolon.search_parallel(SMALL, {"preset": "dgx-a100"}, 16, nodes=2, seq_len=512, tp=[8], micro_batch=[1],
                                progress=False).to_pandas()
    sim = t[t.status == "simulated"]
    assert len(sim) and set(sim.tp * sim.pp * sim.dp) == {16}
    with pytest.raises(eidolon.SpecError, match="nodes=2") as e:
        eidolon.search_parallel(SMALL, {"preset": "dgx-a100", "nodes": 1}, 16, nodes=2, progress=False)
    assert e.value.problems[0].path == "cluster.nodes"


def test_perfetto_needs_a_timeline(tmp_path):
    r = eidolon.run({"kind": "selftest", "iterations": 2}, progress=False)
    with pytest.raises(ValueError, match="timeline"):
        r.to_perfetto(tmp_path / "x.json")
    quiet = eidolon.run({"kind": "training", "model": {"preset": "gpt-22b", "layers": 2}, "gpu": "a100-80gb-sxm",
                         "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallel": {"tp": 8, "global_batch": 1},
                         "seq_len": 512, "timeline_ranks": [-1]}, progress=False)
    with pytest.raises(ValueError, match="timeline_ranks recorded none"):
        quiet.to_perfetto(tmp_path / "x.json")
