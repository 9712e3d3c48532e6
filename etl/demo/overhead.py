"""SYNTHETIC runs of one experiment that differ in instruments, for `instrument_overhead`.

The talk in shared/seeds (experiment 2) measures what each tool costs a training job:
time per epoch with and without it, and the bytes it writes. These four runs are that
experiment made up (nothing was measured, no GPU was used): the same small network, batch
size and GPU (run.toml), each with one instrument:
- `cnn_nvidia_smi`: an nvidia-smi CSV log, the job's time per iteration from its training
  log (run.toml `seconds_per_iteration`, 12.1 ms): the least instrumented run;
- `cnn_dcgm`: DCGM exporter scrapes, 12.2 ms per iteration (run.toml);
- `cnn_nsys`: an Nsight Systems export whose NVTX steps take 12.9 ms;
- `cnn_pytorch_profiler`: a PyTorch profiler trace, whose steps take what the demo's
  synthetic network takes under it (~13.8 ms).
Monitors sample every 100 ms over 250 iterations (an epoch of the made-up job).
"""
from __future__ import annotations

import random
from pathlib import Path
from zoneinfo import ZoneInfo

from etl.demo.kineto import BASE_TIME_NS, GPU_NAME, RunSpec, write_trace
from etl.demo.nsys import dcgm_scrape, sample_moment, smi_line, write_logs, write_nsys_export

MODEL = "cnn-synthetic"
EPOCH_ITERATIONS = 250
MONITOR_SAMPLE_NS = 100_000_000
SECONDS_PER_ITERATION = {"cnn_nvidia_smi": 0.0121, "cnn_dcgm": 0.0122}
NSYS_STEP_NS = 12_900_000
PROFILED = RunSpec("cnn_pytorch_profiler", "fp32", 1)
RUNS = ("cnn_nvidia_smi", "cnn_dcgm", "cnn_nsys", PROFILED.name)


def write_overhead_demo(dest: Path, seed: int) -> list[Path]:
    """The four run folders under `dest`."""
    start = BASE_TIME_NS + 7_200_000_000_000  # 2 h after the other demo runs' base
    folders = []
    for name in RUNS:
        folder = dest / name
        folder.mkdir()
        _write_instrument(folder, name, start, f"{seed}:{name}", seed)
        (folder / "run.toml").write_text(_run_toml(name), encoding="utf-8")
        folders.append(folder)
    return folders


def _write_instrument(folder: Path, name: str, start_ns: int, rng_seed: str, seed: int
                      ) -> None:
    if name == "cnn_nsys":
        write_nsys_export(folder / "profile.sqlite", start_ns, steps=5, kernels_per_step=20,
                          step_ns=NSYS_STEP_NS, seed=rng_seed)
    elif name == PROFILED.name:
        write_trace(folder, PROFILED, 0, seed)
    else:
        _write_monitor(folder, name, start_ns, random.Random(rng_seed))


def _write_monitor(folder: Path, name: str, start_ns: int, rng: random.Random) -> None:
    """One monitor's log over an epoch of the job (nvidia-smi in UTC, as run.toml says)."""
    span = int(EPOCH_ITERATIONS * SECONDS_PER_ITERATION[name] * 1e9)
    moments = [sample_moment(start_ns + t) for t in range(0, span, MONITOR_SAMPLE_NS)]
    if name == "cnn_nvidia_smi":
        zone = ZoneInfo("UTC")
        write_logs(folder, ["timestamp, index, utilization.gpu [%], power.draw [W]"]
                   + [smi_line(m, zone, rng) for m in moments], [])
    else:
        write_logs(folder, [], [line for m in moments for line in dcgm_scrape(m, rng)])


def _run_toml(name: str) -> str:
    seconds = SECONDS_PER_ITERATION.get(name)
    return "\n".join([
        "# SYNTHETIC run written by `etl demo` (etl/demo/overhead.py): generated, not measured.",
        "# One run of a made-up experiment that differs from the others in its instrument.",
        f'model = "{MODEL}"', 'framework = "pytorch"', 'framework_version = "2.3.0"',
        'exec_mode = "eager"', 'precision = "fp32"', "batch_size = 64", f'gpu = "{GPU_NAME}"',
        'tags = ["synthetic", "demo", "overhead"]', "synthetic = true", 'timezone = "UTC"',
        *([f"seconds_per_iteration = {seconds}  # from the job's training log"]
          if seconds is not None else []), ""])
