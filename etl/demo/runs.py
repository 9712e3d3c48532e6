"""SYNTHETIC demo runs for `etl demo`: the runs folder, one module per format writing its files.

Nothing here was measured (see kineto.py for what the runs exercise): kineto.py writes the
PyTorch profiler traces, ncu.py an Nsight Compute export of one step, nsys.py an Nsight
Systems export with two monitor logs, xplane.py TensorFlow-format profiles, overhead.py
four runs of one experiment that differ in their instrument (instrument_overhead).
"""
from __future__ import annotations

from pathlib import Path

from etl.demo.kineto import (BASE_TIME_NS, DEMO_RUNS, GPU_NAME, ITERATIONS, NCU_STEP, RunSpec,
                             write_trace)
from etl.demo.ncu import write_ncu_export
from etl.demo.nsys import write_nsys_demo
from etl.demo.overhead import write_overhead_demo
from etl.demo.xplane import write_tf_demo


def write_demo(dest: Path, seed: int = 0) -> list[Path]:
    """Write the synthetic runs under `dest` (new or empty); return the run folders."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise FileExistsError(f"{dest} exists and is not empty: `etl demo` writes only into "
                              "a new or empty directory (remove it or pick another path)")
    dest.mkdir(parents=True, exist_ok=True)
    folders = []
    for run in DEMO_RUNS:
        folder = dest / run.name
        folder.mkdir()
        for rank in range(run.world_size):
            write_trace(folder, run, rank, seed)
        (folder / "run.toml").write_text(_run_toml(run), encoding="utf-8")
        if run.world_size == 1:  # the single-GPU runs get an ncu export of one step
            write_ncu_export(folder / "rank0.pt.trace.json", folder / f"ncu_step{NCU_STEP}_raw.csv",
                             NCU_STEP, f"{seed}:{run.name}:ncu")
        if run.world_size > 1:
            _write_unrelated_files(folder)
        folders.append(folder)
    folders.append(_write_nsys_run(dest, seed))
    return folders + write_tf_demo(dest, seed) + write_overhead_demo(dest, seed)


NSYS_RUN = "resnet_amp_nsys"
NSYS_TIMEZONE = "Europe/Berlin"


def _write_nsys_run(dest: Path, seed: int) -> Path:
    folder = dest / NSYS_RUN
    folder.mkdir()
    write_nsys_demo(folder, f"{seed}:{NSYS_RUN}", BASE_TIME_NS + 3_600_000_000_000,
                    NSYS_TIMEZONE)
    (folder / "run.toml").write_text("\n".join([
        "# SYNTHETIC run written by `etl demo` (etl/demo/nsys.py): generated, not measured.",
        "# An nsys export and two monitor logs of one made-up run; no GPU was used.",
        'model = "resnet50-synthetic"', 'framework = "pytorch"', 'exec_mode = "eager"',
        'precision = "amp"', "batch_size = 64", f'gpu = "{GPU_NAME}"',
        'tags = ["synthetic", "demo", "nsys"]', "synthetic = true",
        f'timezone = "{NSYS_TIMEZONE}"  # nvidia-smi prints local time without a zone', ""]),
        encoding="utf-8")
    return folder


def _run_toml(run: RunSpec) -> str:
    return "\n".join([
        "# SYNTHETIC run written by `etl demo` (etl/demo/kineto.py): generated, not measured.",
        "# No GPU was used; these numbers say nothing about any real hardware.",
        'model = "resnet50-synthetic"', 'framework = "pytorch"', 'framework_version = "2.3.0"',
        'exec_mode = "eager"', f'precision = "{run.precision}"', "batch_size = 64",
        f'gpu = "{GPU_NAME}"', 'tags = ["synthetic", "demo"]', "synthetic = true",
        *([f"ncu_iteration = {NCU_STEP}"] if run.world_size == 1 else []), ""])


def _write_unrelated_files(folder: Path) -> None:
    """Files a real run folder often holds beside its traces; the ingest must skip them."""
    log = ["# SYNTHETIC training log written by `etl demo`; not from a real job."]
    log += [f"[rank0] step {n}/{ITERATIONS} loss {6.9 - 0.05 * n:.4f} lr 0.1"
            for n in range(1, ITERATIONS + 1)]
    (folder / "train.log").write_text("\n".join(log) + "\n", encoding="utf-8")
    (folder / "config.json").write_text('{"lr": 0.1}\n', encoding="utf-8")
