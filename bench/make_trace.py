"""Build a large realistic Kineto trace by repeating a real one.

Each copy is shifted in time by the span of the original (plus a gap), and correlation
ids, External ids and ProfilerStep numbers are renumbered so links stay within one copy.
Numbers are written back with their exact decimal digits.

    python bench/make_trace.py SRC.json.gz OUT.json --mb 1000
"""
from __future__ import annotations

import argparse
import copy
import decimal
import gzip
import json
import re
from pathlib import Path
from typing import Any

import msgspec

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh, parse_float=decimal.Decimal)


def span(events: list[dict[str, Any]]) -> tuple[decimal.Decimal, decimal.Decimal]:
    starts = [e["ts"] for e in events if "ts" in e]
    ends = [e["ts"] + e.get("dur", 0) for e in events if "ts" in e]
    return min(starts), max(ends)


def shifted(events: list[dict[str, Any]], copy_no: int, shift: decimal.Decimal,
            id_stride: int, step_stride: int) -> list[dict[str, Any]]:
    out = []
    for ev in events:
        ev = copy.copy(ev)
        if "ts" in ev:
            ev["ts"] = ev["ts"] + shift * copy_no
        args = ev.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key in ("correlation", "External id", "external id"):
                if isinstance(args.get(key), int):
                    args[key] += id_stride * copy_no
            ev["args"] = args
        if ev.get("ph") in ("s", "f") and isinstance(ev.get("id"), int):
            ev["id"] += id_stride * copy_no
        name = ev.get("name")
        if isinstance(name, str) and (m := STEP.match(name)):
            ev["name"] = f"ProfilerStep#{int(m.group(1)) + step_stride * copy_no}"
        out.append(ev)
    return out


def write(src: Path, dest: Path, target_bytes: int) -> tuple[int, int]:
    doc = load(src)
    events = doc.pop("traceEvents")
    start, end = span(events)
    shift = (end - start) + 1000
    id_stride = 10 ** (len(str(_max_id(events))) + 1)
    steps = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    step_stride = (max(steps) + 1) if steps else 0
    encoder = msgspec.json.Encoder(decimal_format="number")
    header = encoder.encode(doc)[:-1]
    count = 0
    with open(dest, "wb") as fh:
        fh.write(header + (b", " if doc else b"") + b'"traceEvents": [\n')
        copy_no = 0
        while fh.tell() < target_bytes or copy_no == 0:
            part = shifted(events, copy_no, shift, id_stride, step_stride)
            encoded = [encoder.encode(e) for e in part]
            room = target_bytes - fh.tell()
            if copy_no == 0 and sum(map(len, encoded)) > room:
                encoded = _prefix(encoded, room)  # smaller than one copy: its first events
                part = part[:len(encoded)]
            body = b",\n".join(encoded)
            fh.write((b",\n" if copy_no else b"") + body)
            count += len(part)
            copy_no += 1
            if len(part) < len(events):
                break
        fh.write(b"\n]}\n")
        return fh.tell(), count


def _prefix(encoded: list[bytes], room: int) -> list[bytes]:
    total = 0
    for n, item in enumerate(encoded):
        total += len(item) + 2
        if total > room:
            return encoded[:max(n, 1)]
    return encoded


def _max_id(events: list[dict[str, Any]]) -> int:
    best = 0
    for e in events:
        for key in ("correlation", "External id", "external id"):
            value = (e.get("args") or {}).get(key)
            if isinstance(value, int):
                best = max(best, value)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--mb", type=float, default=100)
    args = parser.parse_args()
    size, count = write(args.src, args.dest, int(args.mb * 1e6))
    print(f"wrote {args.dest}: {size / 1e6:.1f} MB, {count} events")


if __name__ == "__main__":
    main()
