"""The bridges a cold-start row starts: each tree as a user has it installed, and without bytecode.

A user's bridge has bytecode: ``pip install`` of the wheel byte-compiles the package, and
an editable install writes ``__pycache__`` on its first run. A machine that exports
``PYTHONDONTWRITEBYTECODE=1`` (this one does) never writes it, so without care every
launch compiles the bridge's ~45 modules from source (~65 ms here) while the
dependencies load from the ``.pyc`` pip wrote. So a tree is byte-compiled before the
cold rows (``compileall``, as pip does), and a copy of its ``agybridge/`` without
``__pycache__``, started with ``PYTHONDONTWRITEBYTECODE=1``, shows what a launch costs
with no bytecode of the bridge's own (the dependencies keep theirs, so this is not
``PYTHONPYCACHEPREFIX``, which would compile them too). Stdlib only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_WHERE = "import agybridge; print(agybridge.__file__)"


@dataclass(frozen=True)
class ColdTree:
    """One bridge tree prepared for cold starts."""

    label: str
    #: The ``agybridge/`` package a bridge started with `launch` (bytecode) imports.
    package: Path
    #: cwd and PYTHONPATH of that bridge (None: the bench's own).
    cwd: Path | None
    pythonpath: str | None
    #: Holds a copy of ``agybridge/`` without bytecode.
    source_copy: Path

    def launch(self, *, bytecode: bool) -> tuple[Path | None, dict[str, str]]:
        """(cwd, environment additions) for ``python -m agybridge``: ``-m`` puts the
        cwd first on ``sys.path``, so the cwd chooses the package."""
        if bytecode:
            return self.cwd, {"PYTHONPATH": self.pythonpath} if self.pythonpath else {}
        # Nothing written into the copy: every launch compiles the bridge again.
        extra = {"PYTHONPATH": str(self.source_copy), "PYTHONDONTWRITEBYTECODE": "1"}
        return self.source_copy, extra


def imported_package(cwd: Path | None, extra_env: dict[str, str]) -> Path:
    """The ``agybridge/`` directory ``python -m agybridge`` imports from ``cwd``."""
    env = {**os.environ, **extra_env}
    done = subprocess.run(
        [sys.executable, "-c", _WHERE], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return Path(done.stdout.strip()).resolve().parent


def prepare(label: str, cwd: Path | None, pythonpath: str | None, scratch: Path) -> ColdTree:
    """Byte-compile the tree's package (as pip does at install) and make its
    bytecode-free copy under ``scratch`` (a fresh directory)."""
    package = imported_package(cwd, {"PYTHONPATH": pythonpath} if pythonpath else {})
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    shutil.copytree(
        package, scratch / "agybridge", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    tree = ColdTree(label, package, cwd, pythonpath, scratch)
    copy_cwd, copy_env = tree.launch(bytecode=False)
    imported = imported_package(copy_cwd, copy_env)
    if imported != (scratch / "agybridge").resolve():
        raise SystemExit(f"the bytecode-free copy of {package} imports {imported} instead")
    return tree
