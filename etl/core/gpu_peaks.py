"""The peaks of the GPU catalog (etl/core/gpus.toml) as SQL relations the views read.

    gpu_peaks        one row per device name and precision the catalog knows
    peak_precisions  one row per runs.precision spelling: the peak precision it reads

They are views over VALUES made from the TOML when the views are created (etl/views/database.py,
etl/spark/session.py): editing the catalog changes the views' inputs, not the stored data,
so no run needs a new ingest. Names are matched as `lower(trim(name))`.
"""
from __future__ import annotations

import math
from decimal import Decimal
from functools import cache
from typing import Any

from etl.core import gpus

CATALOG = gpus.CATALOG
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
TERA = 10 ** 12

RELATION_DOCS = {
    "gpu_peaks": (
        "Dense peak FLOP/s per GPU model and precision, from the catalog etl/core/gpus.toml "
        "(each row with the datasheet it comes from). Grain: one row per device name and "
        "precision. [project]", {
            "gpu_key": "lower(trim(name)) of a device name as traces write it (devices.name, "
                       "runs.gpu); join on lower(trim(...)) of those",
            "gpu_name": "the device name as the catalog spells it",
            "model": "the GPU model the name belongs to",
            "peak_precision": "fp64, fp32 (CUDA cores), tf32, fp16, bf16 (tensor cores, "
                              "FP32 accumulate) or fp8 (tensor cores)",
            "peak_flops_per_s": "dense peak in FLOP/s at boost clock, per device as the trace "
                                "sees it",
            "source": "the datasheet the peak comes from"}),
    "gpu_specs": (
        "Memory, bandwidth and SM count per GPU model, from the catalog etl/core/gpus.toml "
        "(each row with its datasheet): the memory side of the rooflines. Grain: one row per "
        "device name. [project]", {
            "gpu_key": "lower(trim(name)) of a device name as traces write it; join on "
                       "lower(trim(devices.name)) or lower(trim(runs.gpu))",
            "gpu_name": "the device name as the catalog spells it",
            "catalog_key": "the catalog row's key (etl gpus; etl forecast --gpu)",
            "sm_count": "SMs (CUs on AMD) per device as the trace sees it; NULL when no "
                        "source read gives it",
            "memory_bytes": "device memory, bytes (datasheet GB × 10^9); NULL when unknown",
            "memory_bytes_per_s": "peak memory bandwidth, bytes/s (datasheet GB/s × 10^9); "
                                  "NULL when unknown",
            "source": "the datasheet the figures come from"}),
    "peak_precisions": (
        "Which peak a run's precision (runs.precision) is measured against, from "
        "etl/core/gpus.toml [precisions]: fp32 → the CUDA-core FP32 peak (PyTorch does not "
        "use TF32 for fp32 matmuls unless allowed; such a run says tf32), amp → fp16. "
        "Grain: one row per precision spelling. [project]", {
            "run_precision": "runs.precision lower-cased (fp32, amp, bf16, tf32, ...)",
            "peak_precision": "the gpu_peaks.peak_precision it reads"}),
}


@cache
def catalog() -> dict[str, Any]:
    """The catalog with each row's `like` applied (the rows as gpu_peaks reads them)."""
    doc = dict(gpus.raw_catalog())
    doc["gpu"] = gpus.resolved_rows(doc)
    return doc


def problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with a catalog: each GPU needs names, a source and known precisions
    with positive finite peaks; a name belongs to one GPU; precisions map to known ones."""
    found: list[str] = []
    seen: set[str] = set()
    for entry in doc.get("gpu", []):
        model = entry.get("model", "?")
        peaks = entry.get("peak_tflops", {})
        if not entry.get("names") or not str(entry.get("source", "")).strip():
            found.append(f"{model}: needs names and a source (the datasheet)")
        if not peaks or set(peaks) - set(PRECISIONS):
            found.append(f"{model}: peak_tflops must name precisions among {PRECISIONS}")
        found += [f"{model}: peak {p} = {v!r} is not a positive number" for p, v in
                  peaks.items() if not isinstance(v, (int, float)) or not 0 < v < math.inf]
        for name in entry.get("names", []):
            if _key(name) in seen:
                found.append(f"{model}: name {name!r} is listed twice")
            seen.add(_key(name))
    found += [f"[precisions] {k} = {v!r} is not one of {PRECISIONS}"
              for k, v in doc.get("precisions", {}).items() if v not in PRECISIONS]
    return found


def _key(name: str) -> str:
    return name.strip().lower()


def peak_rows(doc: dict[str, Any]) -> list[tuple[str, str, str, str, float, str]]:
    # through the decimal text: 23.95 TFLOP/s is exactly 23 950 000 000 000 FLOP/s
    return [(_key(name), name, entry["model"], precision,
             float(Decimal(str(tflops)) * TERA),
             entry["source"])
            for entry in doc.get("gpu", []) for name in entry["names"]
            for precision, tflops in entry["peak_tflops"].items()]


def relation_selects() -> dict[str, str]:
    """Each relation's SELECT (DuckDB SQL) over the catalog; ValueError if it is broken."""
    doc = catalog()
    broken = problems(doc)
    if broken:
        raise ValueError(f"{CATALOG}: {broken[0]}")
    peaks = ", ".join(f"({_text(k)}, {_text(n)}, {_text(m)}, {_text(p)}, {f!r}, {_text(s)})"
                      for k, n, m, p, f, s in peak_rows(doc))
    precisions = ", ".join(f"({_text(k.lower())}, {_text(v)})"
                           for k, v in doc["precisions"].items())
    specs = ", ".join(f"({_text(k)}, {_text(n)}, {_text(c)}, {_number(sm)}, {_number(mem)}, "
                      f"{_number(bw)}, {_text(s)})" for k, n, c, sm, mem, bw, s in spec_rows(doc))
    return {
        "gpu_specs": "SELECT gpu_key, gpu_name, catalog_key, CAST(sm_count AS INTEGER) AS "
                     "sm_count, CAST(memory_bytes AS DOUBLE) AS memory_bytes, "
                     "CAST(memory_bytes_per_s AS DOUBLE) AS memory_bytes_per_s, source FROM "
                     f"(VALUES {specs}) AS t(gpu_key, gpu_name, catalog_key, sm_count, "
                     "memory_bytes, memory_bytes_per_s, source)",
        "gpu_peaks": "SELECT gpu_key, gpu_name, model, peak_precision, "
                     "CAST(peak_flops_per_s AS DOUBLE) AS peak_flops_per_s, source FROM "
                     f"(VALUES {peaks}) AS t(gpu_key, gpu_name, model, peak_precision, "
                     "peak_flops_per_s, source)",
        "peak_precisions": "SELECT run_precision, peak_precision FROM "
                           f"(VALUES {precisions}) AS t(run_precision, peak_precision)",
    }


def spec_rows(doc: dict[str, Any]) -> list[tuple[str, str, str, Any, Any, Any, str]]:
    def giga(value: Any) -> float | None:
        return None if value is None else float(Decimal(str(value)) * 10 ** 9)

    return [(_key(name), name, entry["key"], entry.get("sm_count"),
             giga(entry.get("memory_gb")), giga(entry.get("mem_bw_gbs")), entry["source"])
            for entry in doc.get("gpu", []) for name in entry["names"]]


def _number(value: Any) -> str:
    return "NULL" if value is None else repr(value)


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
