"""The native module's type stubs match the built module, and are shipped."""

import ast
import inspect
import subprocess
import tomllib
from pathlib import Path

import pytest

import eidolon._native
from eidolon._native import bindings, go

NATIVE = Path(eidolon._native.__file__).parent
ROOT = Path(__file__).resolve().parents[2]


def _stub_functions(tree: ast.Module) -> dict[str, list[str]]:
    return {f.name: [a.arg for a in f.args.args] for f in tree.body if isinstance(f, ast.FunctionDef)}


def test_bindings_stub_has_every_function_with_its_parameters():
    stub = _stub_functions(ast.parse((NATIVE / "bindings.pyi").read_text()))
    built = {name: list(inspect.signature(fn).parameters)
             for name, fn in vars(bindings).items()
             if inspect.isfunction(fn) and fn.__module__ == bindings.__name__ and not name.startswith("_")}
    assert stub == built


def test_bindings_stub_return_types_hold_at_run_time():
    tree = ast.parse((NATIVE / "bindings.pyi").read_text())
    returns = {f.name: ast.unparse(f.returns) for f in tree.body if isinstance(f, ast.FunctionDef)}
    types = {"int": int, "bool": bool, "float": float, "str": str, "None": type(None), "go.Slice_byte": go.Slice_byte}
    handle = bindings.Start('{"kind": "selftest", "iterations": 10}', 0.0)
    got = {
        "Start": handle,
        "Wait": bindings.Wait(handle, 5000),
        "Progress": bindings.Progress(handle),
        "Result": bindings.Result(handle),
        "Cancel": bindings.Cancel(bindings.Start('{"kind": "selftest", "iterations": 10}', 0.0)),
        "Validate": bindings.Validate('{"kind": "selftest"}', 0.0),
        "Kinds": bindings.Kinds(),
        "Presets": bindings.Presets("gpus"),
        "Canonical": bindings.Canonical('{"kind": "selftest"}'),
        "EngineVersion": bindings.EngineVersion(),
        "DefaultMaxMemoryBytes": bindings.DefaultMaxMemoryBytes(),
        "FreeMemory": bindings.FreeMemory(),
    }
    for name, value in got.items():
        assert type(value) is types[returns[name]], name
    assert got["Cancel"] == ""  # an error-only function: the nil error's text
    with pytest.raises(RuntimeError, match="^InternalError: panic"):
        bindings.ForcePanic()
    assert set(returns) == set(got) | {"ForcePanic"}


def test_go_stub_matches_the_slice_class():
    tree = ast.parse((NATIVE / "go.pyi").read_text())
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    assert issubclass(go.Slice_byte, go.GoClass)
    for method in classes["Slice_byte"].body:
        if isinstance(method, ast.FunctionDef):
            assert callable(getattr(go.Slice_byte, method.name)), method.name
    data = bytes(bindings.Presets("gpus"))
    s = go.Slice_byte.from_bytes(data[:16])
    assert (len(s), s[0], bytes(s[8:16])) == (16, data[0], data[8:16])


def test_stubs_are_committed_and_shipped():
    names = {"bindings.pyi", "go.pyi"}
    assert names <= {p.name for p in NATIVE.iterdir()}  # installed beside the module
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.pyi" in data["eidolon._native"]
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    rel = [f"python/eidolon/_native/{n}" for n in sorted(names)]
    ignored = subprocess.run(["git", "check-ignore", *rel], cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout == ""  # .gitignore excludes the generated files only
