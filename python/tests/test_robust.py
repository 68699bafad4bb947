"""Nothing a spec can say kills the interpreter, hangs it, or returns a wrong number quietly."""

import subprocess
import sys

import pytest

import eidolon


def test_malformed_yaml_and_json_and_non_mappings_are_spec_errors(tmp_path):
    bad_yaml = tmp_path / "s.yaml"
    bad_yaml.write_text("kind: selftest\n  iterations: [1,\n")
    with pytest.raises(eidolon.SpecError, match="not valid YAML"):
        eidolon.run(bad_yaml)
    listy = tmp_path / "l.yaml"
    listy.write_text("- kind: selftest\n")
    with pytest.raises(eidolon.SpecError, match="must be a mapping, got list"):
        eidolon.validate(listy)
    bad_json = tmp_path / "s.json"
    bad_json.write_text('{"kind": "selftest",')
    with pytest.raises(eidolon.SpecError, match="not valid JSON"):
        eidolon.run(bad_json)
    with pytest.raises(eidolon.SpecError, match="got list"):
        eidolon.run([{"kind": "selftest"}])
    # the CLI prints the error, not a traceback
    out = subprocess.run([sys.executable, "-m", "eidolon", "run", str(bad_yaml)], capture_output=True, text=True)
    assert out.returncode == 2
    assert "not valid YAML" in out.stderr and "Traceback" not in out.stderr


def test_problems_all_at_once_with_paths():
    assert eidolon.validate({"kind": "selftest", "seed": "x", "iterations": -1}) == [
        ("seed", "must be an integer, got a string"),
        ("iterations", "must be in [1, 1e15], got -1"),
    ]
    ps = eidolon.validate({"kind": "operators", "gpu": "h100-sxm", "model": {"preset": "gpt-22b", "layers": "x"}})
    assert ps == [("model.layers", "must be an integer, got a string")]
    with pytest.raises(eidolon.SpecError) as e:
        eidolon.run({"kind": "operators", "gpu": "h100-sxm", "model": {"preset": "gpt-22b", "layers": -1}})
    assert e.value.problems == [("model.layers", "must be in [1, 16384], got -1")]


def test_validate_reports_what_run_rejects():
    spec = {"kind": "training", "model": {"preset": "gpt-22b", "layers": 4}, "gpu": "a100-80gb-sxm",
            "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallel": {"tp": 8, "pp": 4},
            "timeline_ranks": [99]}
    ps = eidolon.validate(spec)
    assert ps and all(p.startswith("parallel") or p == "timeline_ranks[0]" for p, _ in ps)
    with pytest.raises(eidolon.SpecError):
        eidolon.run(spec, progress=False)


def test_units_slip_in_a_search_cluster_is_a_spec_error():
    # used to abort the interpreter from a parallel_search worker goroutine
    spec = {"kind": "parallel_search", "model": {"preset": "gpt-22b", "layers": 8}, "gpu": "a100-80gb-sxm",
            "cluster": {"topology": "switch", "gpus": 8, "bandwidth_bytes_per_s": 25},
            "global_batch": 8, "seq_len": 1024, "tp": [1], "pp": [1]}
    with pytest.raises(eidolon.SpecError, match="bandwidth_bytes_per_s"):
        eidolon.run(spec, progress=False)
    assert eidolon.run({"kind": "selftest", "iterations": 10}, progress=False)["summary"].num_rows == 1


def test_memory_budget_refuses_before_the_run():
    spec = {"kind": "inference", "model": "llama2-7b", "gpu": "a100-80gb-sxm",
            "cluster": {"preset": "dgx-a100", "nodes": 1}, "output_tokens": 65536}
    with pytest.raises(eidolon.SpecError, match=r"output_tokens: the run would need about .* GiB") as e:
        eidolon.run(spec, progress=False, max_memory_bytes=2**30)
    assert "max_memory_bytes" in str(e.value)
    assert eidolon.validate(spec, max_memory_bytes=2**30)[0][0] == "output_tokens"
    assert eidolon.validate(dict(spec, output_tokens=16), max_memory_bytes=2**30) == []
    with pytest.raises(eidolon.SpecError, match="max_memory_bytes"):
        eidolon.run(spec, progress=False, max_memory_bytes=-5)
    serving = {"kind": "serving", "model": {"preset": "llama3-8b", "layers": 2}, "gpu": "a100-80gb-sxm",
               "cluster": {"preset": "dgx-a100", "nodes": 1}, "workload": {"rate_per_s": 1e6, "duration_s": 1e6}}
    with pytest.raises(eidolon.SpecError, match=r"workload.duration_s: the run would need about .* GiB"):
        eidolon.run(serving, progress=False)
    seed = {"kind": "seedflood", "topology": {"kind": "ring", "clients": 16},
            "model": {"kind": "mlp", "hidden": [1000000]}}
    with pytest.raises(eidolon.SpecError, match="model.hidden"):
        eidolon.run(dict(seed, max_memory_bytes=2**31), progress=False)
