"""Build step: compile the Go core into a CPython extension with gopy.

The gopy build writes into _gopy_build/ (a name Go's `./...` ignores); the
generated Python modules and the shared library are then copied into
python/eidolon/_native/ (git-ignored) and, for a wheel, into the build tree.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
GEN = ROOT / "_gopy_build"
NATIVE = ROOT / "python" / "eidolon" / "_native"
KEEP = ("bindings.py", "go.py")  # build.py is gopy's own build script: not shipped


class GopyBuild(build_ext):
    def run(self):
        tools = ROOT / ".tools"
        env = dict(os.environ, PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
        if not (tools / "gopy").exists():
            subprocess.run(["go", "install", "tool"], cwd=ROOT, env=dict(env, GOBIN=str(tools)), check=True)
        shutil.rmtree(GEN, ignore_errors=True)
        subprocess.run(
            [str(tools / "gopy"), "build", f"-vm={sys.executable}", f"-output={GEN}",
             "-name=native", "-no-make=true", "./bindings"],
            cwd=ROOT, env=env, check=True,
        )
        for old in NATIVE.glob("*"):
            if old.name != "__init__.py" and old.suffix != ".pyi":  # the .pyi stubs are committed
                old.unlink()
        files = [GEN / n for n in KEEP] + list(GEN.glob("_native*.so"))
        for f in files:
            shutil.copy2(f, NATIVE / f.name)
        if not self.inplace:
            dest = Path(self.build_lib) / "eidolon" / "_native"
            dest.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy2(f, dest / f.name)


def go_version() -> str:
    """The project's version: the Version constant in bindings/bindings.go,
    which the engine writes into every table's metadata."""
    src = (ROOT / "bindings" / "bindings.go").read_text()
    m = re.search(r'^const Version = "([^"]+)"$', src, re.M)
    if m is None:
        raise RuntimeError('bindings/bindings.go has no line `const Version = "..."`')
    return m.group(1)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(version=go_version(), cmdclass={"build_ext": GopyBuild}, distclass=BinaryDistribution)
