"""Write the named broken corpus (tests/data/broken/) from the recipes below.

    python tests/data/broken/make_broken.py [DEST]     # DEST defaults to this folder

Every file is a few hundred bytes; anything big or machine-specific (a gzip bomb, symlink
loops, dangling symlinks) is made at test time instead (see EXPECTED.toml `symlinks` and
tests/load/test_hostile.py). tests/load/test_broken.py checks that this script reproduces the
committed files byte for byte, so edit the recipe here, then re-run it.

Event ids in EXPECTED.toml are indexes into traceEvents. The standard events:
    0 STEP     ProfilerStep#1 [0, 100 us) on pid 1 / tid 1
    1 LAUNCH   cudaLaunchKernel, correlation 1, at 1 us
    2 KERNEL   kernel "k", correlation 1, [10, 50 us) on device 0 / stream 7
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

STEP = ('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, '
        '"tid": 1, "ts": 0.000, "dur": 100.000}')


def launch(corr: str = "1", ts: str = "1.000") -> str:
    return ('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, '
            f'"tid": 1, "ts": {ts}, "dur": 1.000, "args": {{"correlation": {corr}}}}}')


def kernel(ts: str | None = "10.000", dur: str | None = "40.000", corr: str = "1",
           extra: str = "", ph: str = '"X"', name: str = '"k"', device: str = "0",
           stream: str = "7") -> str:
    times = "".join(f', "{k}": {v}' for k, v in (("ts", ts), ("dur", dur)) if v is not None)
    return (f'{{"ph": {ph}, "cat": "kernel", "name": {name}, "pid": 0, "tid": 7{times}, '
            f'"args": {{"correlation": {corr}, "device": {device}, "stream": {stream}{extra}}}}}')


def op(name: str, ts: str, dur: str) -> str:
    return (f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, '
            f'"ts": {ts}, "dur": {dur}}}')


def trace(*events: str, header: str = "") -> bytes:
    """A Kineto document, one event per line (the profiler's own layout)."""
    body = ",\n  ".join(events)
    return (f'{{"schemaVersion": 1,{header}\n "traceEvents": [\n  {body}\n ]\n}}\n').encode()


GOOD = trace(STEP, launch(), kernel())


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


FILES: dict[str, bytes] = {
    # ---- unreadable: the run is refused with one line ----------------------------------
    "kineto-truncated-mid-event.json": GOOD[:GOOD.index(b'"cat": "kernel"') + 8],
    "kineto-truncated-after-events.json": GOOD.rstrip()[:-1],
    "kineto-truncated.json.gz": _gz(GOOD)[:-12],
    "kineto-empty.json": b"",
    "kineto-whitespace-only.json": b" \n\t\r\n   \n",
    "kineto-empty.json.gz": _gz(b""),
    "kineto-garbage.pt.trace.json": bytes(range(256)) * 2,
    "kineto-html.json": (b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
                         b"<body><h1>502 Bad Gateway</h1></body></html>\n"),
    "kineto-nan-token.json": trace(STEP, launch(), kernel(ts="NaN")),
    "kineto-infinity-token.json": trace(STEP, launch(), kernel(dur="Infinity")),
    "kineto-trailing-garbage.json": GOOD + b"\x00\x00\x00garbage after the document\n",
    "kineto-nul-filled.json": b"\x00" * 512,
    "kineto-corrupt.json.gz": _gz(GOOD)[:12] + bytes(range(200, 256)) * 4,
    "kineto-gzip-of-garbage.json.gz": _gz(bytes(range(256)) * 2),
    "kineto-trace-events-not-list.json": b'{"schemaVersion": 1, "traceEvents": {"0": {}}}\n',
    "kineto-trace-events-null.json": b'{"schemaVersion": 1, "traceEvents": null}\n',
    "kineto-utf16.json": GOOD.decode().encode("utf-16"),
    "kineto-bom.json": b"\xef\xbb\xbf" + GOOD,
    "kineto-lone-surrogate.json": trace(STEP, launch(), kernel(name='"k\\ud800"')),
    "kineto-non-utf8-name.json": trace(STEP, launch(), kernel(name='"k_XX"')).replace(
        b"k_XX", b"k_\xff\xfe"),
    "kineto-non-utf8-key.json": trace(STEP, launch(), kernel()).replace(
        b'"cat": "kernel", "name"', b'"cat": "kernel", "na\xff"'),
    "kineto-non-utf8-header-key.json": GOOD.replace(b'"schemaVersion"', b'"\x80chemaVersion"'),
    "kineto-non-utf8-in-broken-string.json": GOOD.replace(
        b'"cat": "kernel", "name"', b'"cat": "kernel", "name\x80'),
    "kineto-deep-nesting.json.gz": _gz(b'{"schemaVersion": 1, "traceEvents": ['
                                       + b"[" * 100_000 + b"]" * 100_000 + b"]}"),
    # ---- run.toml ---------------------------------------------------------------------
    "runtoml-not-toml.toml": b"model: resnet50\nbatch_size: 256\n",
    "runtoml-wrong-type.toml": b'model = "resnet50"\nbatch_size = "large"\n',
    "runtoml-tags-not-strings.toml": b'tags = ["baseline", 7]\n',
    "runtoml-negative-batch-size.toml": b"batch_size = -4\n",
    "runtoml-non-utf8.toml": b'model = "res\xffnet"\n',
    "runtoml-duplicate-key.toml": b'model = "a"\nmodel = "b"\n',
    "runtoml-batch-size-overflows-int64.toml": b"batch_size = 99999999999999999999\n",
    # ---- odd: ingested, every oddity a row in anomalies --------------------------------
    "kineto-missing-ts.json": trace(STEP, launch(), kernel(ts=None)),
    "kineto-string-ts.json": trace(STEP, launch(), kernel(ts='"10.000"')),
    "kineto-20-digit-ts.json": trace(STEP, launch(), kernel(ts="12345678901234567890")),
    "kineto-bool-dur.json": trace(STEP, launch(), kernel(dur="true")),
    "kineto-negative-dur.json": trace(STEP, launch(), kernel(dur="-5.000")),
    "kineto-sub-ns-ts.json": trace(STEP, launch(), kernel(ts="10.0006")),
    "kineto-exponent-ts.json": trace(STEP, launch(), kernel(ts="1.0e1", dur="4E+1")),
    "kineto-display-time-unit-weird.json": trace(STEP, launch(), kernel(),
                                                 header=' "displayTimeUnit": "fortnights",'),
    "kineto-duplicate-events.json": trace(STEP, launch(), kernel(), launch(), kernel()),
    "kineto-kernel-without-launch.json": trace(STEP, kernel(corr="99")),
    "kineto-overlapping-on-thread.json": trace(STEP, op("aten::a", "10.000", "20.000"),
                                               op("aten::b", "20.000", "20.000")),
    "kineto-unknown-category.json": trace(STEP, launch(), kernel()).replace(
        b'"cat": "kernel"', b'"cat": "gpu_mystery"'),
    "kineto-bare-array.json": ("[" + ",\n".join((STEP, launch(), kernel())) + "]\n").encode(),
    "kineto-event-not-object.json": trace(STEP, "42", launch(), kernel()),
    "kineto-string-correlation.json": trace(STEP, launch(corr='"1"'), kernel(),
                                            kernel(ts="60.000", dur="1.000", corr='"abc"')),
    "kineto-hex-stream.json": trace(STEP, launch(), kernel(stream='"0x7"')),
    "kineto-empty-events.json": b'{"schemaVersion": 1, "traceEvents": []}\n',
    "kineto-no-trace-events.json": b'{"schemaVersion": 1, "deviceProperties": []}\n',
    "kineto-grid-wrong-length.json": trace(STEP, launch(), kernel(extra=', "grid": [1, 2]')),
    "kineto-ph-not-string.json": trace(STEP, launch(), kernel(ph="1")),
    "kineto-gpu-only.json": trace(
        '{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", '
        '"tid": "PyTorch Profiler", "ts": 0.000, "dur": 100.000}',
        kernel(), kernel(ts="60.000", dur="10.000", corr="2")),
    "kineto-ph-is-a-list.json": trace(STEP, launch(), kernel(ph='["X"]')),
    "kineto-end-overflows-int64.json": trace(STEP, launch(), kernel(
        ts="9223372036854775.000", dur="9223372036854775.000")),
    "kineto-ts-overflows-int64.json": trace(STEP, launch(), kernel(ts="99999999999999999")),
    "kineto-20-digit-int.json": trace(STEP, launch(), kernel(corr="12345678901234567890")),
    "kineto-device-id-overflows-int32.json": trace(STEP, launch(), kernel(device="4294967296")),
}

FOLDERS: dict[str, dict[str, bytes]] = {
    "runfolder-no-profiler-output": {"config.json": b'{"lr": 0.1, "epochs": 90}\n',
                                     "run.toml": b'model = "resnet50"\n'},
    "runfolder-symlink-loop": {"t.json": GOOD},
    "runfolder-dangling-trace-symlink": {"rank0.pt.trace.json": GOOD},
    "runfolder-unrelated-files": {
        "t.json": GOOD, "train.log": b"epoch 1 loss 0.5\n", "notes.md": b"# notes\n",
        "config.json": b'{"lr": 0.1}\n',
        "events.out.tfevents.1700000000.host": bytes(range(0, 256, 3)) * 2},
    "runfolder-json-array-metrics": {"t.json": GOOD,
                                     "metrics.json": b'[{"epoch": 1, "loss": 0.5}]\n'},
}


def write(dest: Path = HERE) -> list[Path]:
    written = []
    for name, data in FILES.items():
        (dest / name).write_bytes(data)
        written.append(dest / name)
    for folder, files in FOLDERS.items():
        (dest / folder).mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (dest / folder / name).write_bytes(data)
            written.append(dest / folder / name)
    return written


if __name__ == "__main__":
    out = write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    print(f"wrote {len(out)} files, {sum(p.stat().st_size for p in out):,} bytes")
