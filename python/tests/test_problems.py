"""Spec problems arrive from Go structured (path, message, allowed), not parsed from text."""

import pickle

import pytest

import eidolon
from eidolon import errors
from eidolon.errors import Problem

TRAINING = {"model": {"preset": "gpt-22b", "layers": -4}, "gpu": "a100-80gb-sxm",
            "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallel": {"tp": 8}}


def test_run_error_carries_allowed_from_the_validators():
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.run({"kind": "selftest", "seed": "x", "iterations": -1}, progress=False)
    ps = info.value.problems
    assert [type(p) for p in ps] == [Problem, Problem]
    # the range check states its bounds; the type error has none to state
    assert [(p.path, p.message, p.allowed) for p in ps] == [
        ("seed", "must be an integer, got a string", ""),
        ("iterations", "must be in [1, 1e15], got -1", "[1, 1e15]"),
    ]
    # the exception's text is the engine's message, without the JSON after it
    assert str(info.value) == ("invalid spec, 2 problems:\n  seed: must be an integer, got a string\n"
                               "  iterations: must be in [1, 1e15], got -1")
    assert errors.PROBLEMS_MARK not in str(info.value)


def test_one_of_lists_the_choices_and_nested_paths_keep_allowed():
    (kind,) = eidolon.validate({"kind": "selftes"})
    assert kind.path == "kind"
    assert kind.allowed.startswith('one of ["calibrate", "collective", ') and '"selftest"' in kind.allowed
    (layers,) = eidolon.validate({"kind": "fault_sweep", "training": TRAINING, "link_failures": 1})
    assert (layers.path, layers.allowed) == ("training.model.layers", "[1, 16384]")
    (unknown,) = eidolon.validate({"kind": "selftest", "iteratons": 5})
    assert unknown.allowed == 'a field of ["fail", "iterations", "kind", "max_events", "max_memory_bytes", "name", "panic", "seed"]'


def test_validate_and_run_report_the_same_problems():
    spec = {"kind": "collective", "cluster": {"preset": "dgx-a100"}, "collective": "allreduc"}
    listed = eidolon.validate(spec)
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.run(spec, progress=False)
    assert [(p.path, p.message, p.allowed) for p in info.value.problems] == \
        [(p.path, p.message, p.allowed) for p in listed]
    assert listed[0].allowed.startswith('one of ["all_reduce"')


def test_problems_still_unpack_and_compare_as_pairs():
    p = Problem("a.b", "must be > 0, got -1", "> 0")
    path, message = p  # existing callers unpack pairs
    assert (path, message) == ("a.b", "must be > 0, got -1")
    assert p == ("a.b", "must be > 0, got -1") and len(p) == 2
    assert {p: 1}[("a.b", "must be > 0, got -1")] == 1  # hashes as the pair
    q = pickle.loads(pickle.dumps(p))  # sweep workers pickle exceptions
    assert (q, q.allowed) == (p, "> 0")
    e = pickle.loads(pickle.dumps(eidolon.SpecError("bad", [p])))
    assert e.problems[0].allowed == "> 0"
    # plain pairs given by Python code become Problems without allowed
    assert eidolon.SpecError("x", [("f", "m")]).problems == [Problem("f", "m", "")]
    assert eidolon.SpecError("x", [("f", "m")]).problems[0].allowed == ""


def test_python_side_checks_state_allowed_too():
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.run({"kind": "selftest"}, progress=False, max_memory_bytes=-1)
    assert [(p.path, p.allowed) for p in info.value.problems] == [("max_memory_bytes", "> 0")]


def test_from_native_reads_the_json_not_the_text():
    # a path with a space and a message with ": " would defeat text parsing
    raw = RuntimeError('SpecError: invalid spec: odd path: a: b\x1e[{"path": "odd path", "message": "a: b", "allowed": "x"}]')
    e = errors.from_native(raw)
    assert isinstance(e, eidolon.SpecError)
    assert (str(e), e.problems, e.problems[0].allowed) == ("invalid spec: odd path: a: b", [("odd path", "a: b")], "x")
    # without the mark (never from bindings.classify) the text is kept whole
    e = errors.from_native(RuntimeError("SpecError: something"))
    assert e.problems == [("", "something")]


def test_a_link_slowed_past_the_clock_is_refused_at_its_health():
    # health 1e-300 used to fail the run with a horizon error naming no field
    spec = dict(TRAINING, kind="training", model={"preset": "gpt-22b", "layers": 2}, parallel={"tp": 8, "global_batch": 2},
                faults={"links": [{"src": "n0.gpu1", "dst": "n0.nvswitch", "health": 1e-300}]})
    (p,) = eidolon.validate(spec)
    assert (p.path, p.allowed) == ("faults.links[0].health", "0 or [1e-06, 1]")
    spec["faults"]["links"][0]["health"] = 1e-6
    assert eidolon.validate(spec) == []


def test_fault_sweep_base_is_compiled_at_validation_with_the_base_path():
    # A misspelled device in a fault sweep's training base is refused by
    # validate() (before any run), at the path the user wrote.
    training = dict(TRAINING, model={"preset": "gpt-22b", "layers": 2}, parallel={"tp": 8, "global_batch": 2},
                    faults={"links": [{"src": "n0.gpu9", "dst": "n0.nvswitch", "health": 0.5}]})
    spec = {"kind": "fault_sweep", "training": training, "samples": 2, "link_failures": 1}
    (p,) = eidolon.validate(spec)
    assert p.path == "training.faults.links[0].src"
    assert 'no device named "n0.gpu9"' in p.message
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.run(spec, progress=False)
    assert [(q.path, q.message) for q in info.value.problems] == [(p.path, p.message)]
    # the same training spec on its own reports the path without the prefix
    (top,) = eidolon.validate(dict(training, kind="training"))
    assert (top.path, top.message) == ("faults.links[0].src", p.message)


def test_what_if_gpu_runs_and_its_figures_are_checked():
    base = {"kind": "inference", "model": {"preset": "llama2-7b", "layers": 2},
            "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 1, "batch": 1,
            "prompt_tokens": 64, "output_tokens": 4}
    tpot = {}
    for label, gpu in [("h100", "h100-sxm"), ("h200", "h200"),
                       ("what-if", {"preset": "h100-sxm", "hbm_bandwidth_bytes_per_s": 4.8e12, "hbm_bytes": 141e9})]:
        tpot[label] = eidolon.run(dict(base, gpu=gpu), progress=False).to_pandas("summary")["tpot_s"][0]
    # the H200 preset is the H100's with the H200's memory: the same part
    assert tpot["what-if"] == tpot["h200"] < tpot["h100"]
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.run(dict(base, gpu={"preset": "h100-sxm", "sm_count": 0, "clockhz": 1e9}), progress=False)
    got = {(p.path, p.allowed) for p in info.value.problems}
    assert ("gpu.sm_count", "[1, 1024]") in got
    assert any(path == "gpu.clockhz" and "clock_hz" in allowed for path, allowed in got)
