"""A throwaway Python with HTA for the tests that compare with it: the project does not
depend on HTA. `hta_python(spec)` makes (once, under the tests' cache folder, one process
at a time) a venv with `pip install spec` and returns its python; the test is skipped with
the reason when the package index cannot be reached.

    HTA (Holistic Trace Analysis) 0.6 is published as `traceinsight`.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest


def cache_root() -> Path:
    return Path(os.environ.get("ETL_CACHE_DIR", "/tmp")) / "oracles"


def hta_python(spec: str) -> str:
    """The python of a venv holding `spec` (e.g. traceinsight==0.6.1), made on first use."""
    root = cache_root() / spec.replace("=", "-")
    python = root / "bin" / "python"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".ready").exists():
            _make(root, spec)
    return str(python)


def _make(root: Path, spec: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
    done = subprocess.run([str(root / "bin" / "pip"), "install", "--quiet", spec],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.skip(f"cannot install {spec} for the comparison: "
                    f"{done.stderr.strip().splitlines()[-1:]}")
    (root / ".ready").write_text(spec)
