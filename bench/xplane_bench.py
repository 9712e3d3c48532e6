"""xplane benchmark: ingest MB/s, events/s and peak memory of an XSpace (xplane.pb) of about
--mb MB, beside a Kineto trace of the same events. Prints a table; asserts nothing.

Both files hold the same synthetic training steps: per kernel, a TF op on the executor
thread, the cuLaunchKernel call inside it (correlation id) and the kernel on the GPU stream
(with its kernel details and op annotation); the XSpace is written by the tests' encoder
(etl/demo/xplane.py), the Kineto trace as Chrome-trace JSON of the same events. An XSpace
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

from etl.demo.xplane import Event, Ref  # noqa: E402
from ingest_bench import run_measured  # noqa: E402

CACHE = ROOT / "bench" / ".cache" / "xplane"
KERNELS_PER_STEP = 200
BYTES_PER_KERNEL = 118   # of XSpace, measured on this generator: sizes the step count


def steps_for(mb: int) -> int:
    return max(1, mb * 1_000_000 // (BYTES_PER_KERNEL * KERNELS_PER_STEP))


def step_events(step: int, now: int, correlation: int
                ) -> tuple[list[Event], list[Event], list[Event], int, int]:
    """One step's (main thread, executor thread, GPU stream) events, times in ps from 0;
    and the time and correlation id the next step starts from."""
    main, executor, stream = [], [], []
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
    return main, executor, stream, now + 50_000, correlation


def write_both(xplane: Path, kineto: Path, steps: int) -> None:
    """The XSpace and the Kineto JSON of the same steps, generated step by step (the
    encoded lines are kept as bytes, the events never all at once)."""
    from etl.demo.xplane import _event, _PlaneIds, lfield, vfield

    host_ids, gpu_ids = _PlaneIds(), _PlaneIds()
    lines: list[list[bytes]] = [[], [], []]
    kineto.parent.mkdir(parents=True, exist_ok=True)
    now, correlation = 0, 1
    with open(kineto, "w", encoding="utf-8") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        for step in range(steps):
            main, executor, stream, now, correlation = step_events(step, now, correlation)
            for line, ids, found in ((0, host_ids, main), (1, host_ids, executor),
                                     (2, gpu_ids, stream)):
                lines[line] += [lfield(4, _event(ids, e)) for e in found]
            out.write(("" if step == 0 else ",\n") + kineto_text(main, executor, stream))
        out.write("\n]}\n")
    base = 1_700_000_000_000_000_000

    def line(number: int, name: str, body: list[bytes]) -> bytes:
        return lfield(3, vfield(1, number) + lfield(2, name) + vfield(3, base) + b"".join(body))

    def metadata(ids: _PlaneIds) -> bytes:
        entries = [lfield(4, vfield(1, n) + lfield(2, vfield(1, n) + lfield(2, name)))
                   for name, n in ids.events.items()]
        entries += [lfield(5, vfield(1, n) + lfield(2, vfield(1, n) + lfield(2, name)))
                    for name, n in ids.stats.items()]
        return b"".join(entries)

    host = (vfield(1, 1) + lfield(2, "/host:CPU") + line(1, "python3", lines[0])
            + line(2, "tf_Compute/2", lines[1]) + metadata(host_ids))
    gpu = (vfield(1, 2) + lfield(2, "/device:GPU:0")
           + line(7, "Stream #7(Compute)", lines[2]) + metadata(gpu_ids))
    xplane.parent.mkdir(parents=True, exist_ok=True)
    xplane.write_bytes(lfield(1, host) + lfield(1, gpu))


def kineto_text(main: list[Event], executor: list[Event], stream: list[Event]) -> str:
    """The same events as Kineto Chrome-trace JSON (ts/dur in µs with three decimals)."""
    def us(ps: int) -> str:
        ns = ps // 1000
        return f"{ns // 1000}.{ns % 1000:03d}"

    rows = [f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#'
            f'{e.stats["step_num"]}", "pid": 1, "tid": 1, "ts": {us(e.offset_ps)}, '
            f'"dur": {us(e.duration_ps)}}}' for e in main]
    for e in executor:
        launch = "correlation_id" in e.stats
        cat = "cuda_runtime" if launch else "cpu_op"
        args = f', "args": {{"correlation": {e.stats["correlation_id"]}}}' if launch else ""
        rows.append(f'{{"ph": "X", "cat": "{cat}", "name": "{e.name}", "pid": 1, "tid": 2, '
                    f'"ts": {us(e.offset_ps)}, "dur": {us(e.duration_ps)}{args}}}')
    for e in stream:
        details = str(e.stats["kernel_details"].text)  # type: ignore[union-attr]
        regs = details.split()[0].split(":")[1]
        rows.append(f'{{"ph": "X", "cat": "kernel", "name": "{e.name}", "pid": 0, "tid": 7, '
                    f'"ts": {us(e.offset_ps)}, "dur": {us(e.duration_ps)}, "args": '
                    f'{{"correlation": {e.stats["correlation_id"]}, "device": 0, '
                    f'"stream": 7, "registers per thread": {regs}, "shared memory": 16384, '
                    '"grid": [80, 4, 1], "block": [256, 1, 1]}}')
    return ",\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="XSpace size, MB")
    args = parser.parse_args()
    folder = CACHE / f"{args.mb}MB"
    xplane = folder / "xplane" / "plugins" / "profile" / "s" / "host.xplane.pb"
    kineto = folder / "kineto" / "rank0.json"
    if not xplane.exists() or not kineto.exists():
        write_both(xplane, kineto, steps_for(args.mb))
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
