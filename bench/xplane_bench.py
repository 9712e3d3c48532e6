"""xplane benchmark: ingest MB/s, events/s and peak memory of an XSpace (xplane.pb) of about
--mb MB, beside a Kineto trace of the same events. Prints a table; asserts nothing.

Both files hold the same synthetic training steps: per kernel, a TF op on the executor
thread, the cuLaunchKernel call inside it (correlation id) and the kernel on the GPU stream
(with its kernel details and op annotation); the XSpace is written by the tests' encoder
(etl/demo_xplane.py), the Kineto trace as Chrome-trace JSON of the same events. An XSpace
names an event by a metadata id, so it is ~7x smaller than the JSON of the same events:
compare events/s as well as MB/s.

    python bench/xplane_bench.py --mb 100
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from etl.demo_xplane import Event, Line, Plane, Ref, xspace  # noqa: E402
from ingest_bench import run_measured  # noqa: E402

CACHE = ROOT / "bench" / ".cache" / "xplane"
KERNELS_PER_STEP = 200
BYTES_PER_KERNEL = 118   # of XSpace, measured on this generator: sizes the step count


def steps_for(mb: int) -> int:
    return max(1, mb * 1_000_000 // (BYTES_PER_KERNEL * KERNELS_PER_STEP))


def events(steps: int) -> tuple[list[Event], list[Event], list[Event]]:
    """(main thread, executor thread, GPU stream) events, times in ps from 0."""
    main, executor, stream = [], [], []
    now, correlation = 0, 1
    for step in range(steps):
        start = now
        for k in range(KERNELS_PER_STEP):
            op = f"model/block_{k % 24}/conv_{k % 5}/Conv2D:Conv2D"
            executor.append(Event(op, now * 1000, 20_000_000, {"group_id": step}))
            executor.append(Event("cuLaunchKernel", (now + 2_000) * 1000, 5_000_000,
                                  {"correlation_id": correlation, "group_id": step}))
            stream.append(Event(f"volta_scudnn_128x64_relu_interior_nn_v1_{k % 7}",
                                (now + 9_000) * 1000, 15_000_000 + 1, {
                                    "correlation_id": correlation, "level 0": Ref(op),
                                    "kernel_details": Ref(f"regs:{64 + k % 7} shm:16384 "
                                                          "grid:80,4,1 block:256,1,1"),
                                    "group_id": step}))
            now, correlation = now + 25_000, correlation + 1
        main.append(Event("train", start * 1000, (now - start) * 1000,
                          {"step_num": step, "group_id": step}))
        now += 50_000
    return main, executor, stream


def write_xplane(path: Path, main: list[Event], executor: list[Event], stream: list[Event]
                 ) -> None:
    base = 1_700_000_000_000_000_000
    host = Plane(1, "/host:CPU", [Line(1, "python3", base, main),
                                  Line(2, "tf_Compute/2", base, executor)])
    gpu = Plane(2, "/device:GPU:0", [Line(7, "Stream #7(Compute)", base, stream)],
                {"core_count": 80, "memory_size": 16945512448, "compute_cap_major": 7,
                 "compute_cap_minor": 0})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(xspace([host, gpu]))


def write_kineto(path: Path, main: list[Event], executor: list[Event], stream: list[Event]
                 ) -> None:
    """The same events as Kineto Chrome-trace JSON (ts/dur in µs with three decimals)."""
    def us(ps: int) -> str:
        ns = ps // 1000
        return f"{ns // 1000}.{ns % 1000:03d}"

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        first = True
        for e in main:
            out.write(('' if first else ',\n') + f'{{"ph": "X", "cat": "user_annotation", '
                      f'"name": "ProfilerStep#{e.stats["step_num"]}", "pid": 1, "tid": 1, '
                      f'"ts": {us(e.offset_ps)}, "dur": {us(e.duration_ps)}}}')
            first = False
        for e in executor:
            launch = "correlation_id" in e.stats
            cat = "cuda_runtime" if launch else "cpu_op"
            args = f', "args": {{"correlation": {e.stats["correlation_id"]}}}' if launch else ""
            out.write(f',\n{{"ph": "X", "cat": "{cat}", "name": "{e.name}", "pid": 1, '
                      f'"tid": 2, "ts": {us(e.offset_ps)}, "dur": {us(e.duration_ps)}{args}}}')
        for e in stream:
            details = str(e.stats["kernel_details"].text)  # type: ignore[union-attr]
            regs = details.split()[0].split(":")[1]
            out.write(f',\n{{"ph": "X", "cat": "kernel", "name": "{e.name}", "pid": 0, '
                      f'"tid": 7, "ts": {us(e.offset_ps)}, "dur": {us(e.duration_ps)}, '
                      f'"args": {{"correlation": {e.stats["correlation_id"]}, "device": 0, '
                      f'"stream": 7, "registers per thread": {regs}, "shared memory": 16384, '
                      '"grid": [80, 4, 1], "block": [256, 1, 1]}}')
        out.write("\n]}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="XSpace size, MB")
    args = parser.parse_args()
    folder = CACHE / f"{args.mb}MB"
    xplane = folder / "xplane" / "plugins" / "profile" / "s" / "host.xplane.pb"
    kineto = folder / "kineto" / "rank0.json"
    if not xplane.exists() or not kineto.exists():
        generated = events(steps_for(args.mb))
        write_xplane(xplane, *generated)
        write_kineto(kineto, *generated)
        del generated
    print("| format | file MB | events | etl s | MB/s | events/s | peak RSS MiB, one process |")
    print("|---|---|---|---|---|---|---|")
    for label, run in (("xplane_pb", folder / "xplane"), ("kineto_json", folder / "kineto")):
        file = xplane if label == "xplane_pb" else kineto
        warehouse = folder / f"wh-{label}"
        shutil.rmtree(warehouse, ignore_errors=True)
        measured = run_measured([sys.executable, "-m", "etl.cli", "ingest", str(run),
                                 "--warehouse", str(warehouse)])
        mb = file.stat().st_size / 1e6
        count = steps_for(args.mb) * (3 * KERNELS_PER_STEP + 1)
        print(f"| {label} | {mb:.1f} | {count:,} | {measured.seconds:.1f} | "
              f"{mb / measured.seconds:.1f} | {count / measured.seconds:,.0f} | "
              f"{measured.rss_one_mib} |")


if __name__ == "__main__":
    main()
