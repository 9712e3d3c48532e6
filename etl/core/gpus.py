"""The GPU catalog (etl/core/gpus.toml): products, their datasheet figures, the per-SM
limits that set occupancy, and names resolved to a row or refused.

A name resolves when it is, after lower-casing and splitting into words (vendor words
dropped), the words of exactly one row's key or trace name; else when its words begin
words of exactly one row ("h100 sxm" → H100-SXM5-80GB). Several rows, or none, is a
`GpuNameError` listing the candidates: `H100` is a PCIe or an SXM part, and the forecast
never guesses which.

Occupancy (blocks of one kernel resident on an SM) is CUDA's rule, restated from
cuda_occupancy.h (CUDA 12.9) and CCCL's arch_traits.h: the least of the warp, block,
register and shared-memory limits (`blocks_per_sm`).
"""
from __future__ import annotations

import copy
import math
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from etl.core.errors import EtlError

CATALOG = Path(__file__).with_name("gpus.toml")
VENDOR_WORDS = {"nvidia", "tesla", "amd", "instinct", "geforce", "radeon"}
# names a driver writes for two products: refused as ambiguous, never read as one of them
AMBIGUOUS_NAMES = {"amd instinct mi250x / mi250": ("MI250", "MI250X")}
FIELDS = ("sm_count", "boost_clock_mhz", "memory_gb", "mem_bw_gbs", "l2_mb", "tdp_w")


class GpuNameError(EtlError):
    """A GPU name that is not exactly one catalog row (one line, with the candidates)."""


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one architecture (None where no document read gives them)."""

    arch: str
    warp_size: int
    regs_per_sm: int | None
    max_regs_per_thread: int | None
    smem_per_sm: int | None          # bytes, the largest carveout
    max_smem_per_block: int | None   # bytes
    max_warps_per_sm: int | None
    max_threads_per_sm: int | None
    max_blocks_per_sm: int | None
    reg_alloc_unit: int | None
    smem_alloc_unit: int | None
    reserved_smem_per_block: int
    sub_partitions: int | None
    fp32_gemm_share: float      # of the FP32 peak a GEMM kernel's FP32 lanes give


@dataclass(frozen=True, eq=False)
class Gpu:
    """One catalog row; equal and hashed by its key."""

    key: str
    model: str
    vendor: str
    arch: str
    names: tuple[str, ...]
    sm_count: int | None
    boost_clock_mhz: float | None
    memory_gb: float | None
    mem_bw_gbs: float | None
    l2_mb: float | None
    tdp_w: float | None
    peak_tflops: dict[str, float]
    gemm_fp32_tflops: float | None
    source: str
    missing: dict[str, str]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Gpu) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def peak_flops_per_s(self, precision: str) -> float | None:
        tflops = self.peak_tflops.get(precision)
        return None if tflops is None else tflops * 1e12

    @property
    def bytes_per_s(self) -> float | None:
        return None if self.mem_bw_gbs is None else self.mem_bw_gbs * 1e9

    @property
    def memory_bytes(self) -> float | None:
        return None if self.memory_gb is None else self.memory_gb * 1e9

    def why_missing(self, field: str) -> str:
        """Why a field or precision is absent from the row (the catalog's words)."""
        return self.missing.get(field, f"not in the catalog row {self.key} (etl/core/gpus.toml)")

    @property
    def limits(self) -> ArchLimits | None:
        return arch_limits(self.arch)

    @property
    def fp32_gemm_share(self) -> float:
        """The share of the FP32 peak an fp32 GEMM kernel can use (gpus.toml [arch.*])."""
        limits = self.limits
        return 1.0 if limits is None else limits.fp32_gemm_share


@cache
def raw_catalog() -> dict[str, Any]:
    with open(CATALOG, "rb") as fh:
        return tomllib.load(fh)


def resolved_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The catalog's rows with `like` applied (a row starts from the row it names)."""
    by_key = {row.get("key"): row for row in doc.get("gpu", [])}
    out = []
    for row in doc.get("gpu", []):
        merged: dict[str, Any] = {}
        chain: list[dict[str, Any]] = []
        at = row
        while at is not None and at.get("key") not in {c.get("key") for c in chain}:
            chain.append(at)
            at = by_key.get(at.get("like"))
        for part in reversed(chain):
            merged.update(copy.deepcopy({k: v for k, v in part.items() if k != "like"}))
        out.append(merged)
    return out


def problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with the catalog: every row a key, names, a source, an arch table and
    positive numbers; keys, names and `like` targets unique and known."""
    found: list[str] = []
    keys = [row.get("key") for row in doc.get("gpu", [])]
    found += [f"key {k!r} is listed twice" for k in set(keys) if keys.count(k) > 1]
    found += [f"{row.get('key')}: like {row['like']!r} is no row's key"
              for row in doc.get("gpu", []) if "like" in row and row["like"] not in keys]
    for row in resolved_rows(doc):
        key = row.get("key", "?")
        if not row.get("names") or not str(row.get("source", "")).strip():
            found.append(f"{key}: needs names and a source (the datasheet)")
        if row.get("arch") not in doc.get("arch", {}):
            found.append(f"{key}: arch {row.get('arch')!r} has no [arch.*] table")
        numbers = {f: row[f] for f in FIELDS + ("gemm_fp32_tflops",) if f in row}
        numbers.update(row.get("peak_tflops", {}))
        found += [f"{key}: {f} = {v!r} is not a positive number" for f, v in numbers.items()
                  if not isinstance(v, (int, float)) or not 0 < v < math.inf]
    return found


@cache
def gpus() -> tuple[Gpu, ...]:
    """Every row of the catalog; ValueError naming the first problem of a broken one."""
    doc = raw_catalog()
    broken = problems(doc)
    if broken:
        raise ValueError(f"{CATALOG}: {broken[0]}")
    return tuple(_gpu(row) for row in resolved_rows(doc))


def _gpu(row: dict[str, Any]) -> Gpu:
    return Gpu(key=row["key"], model=row["model"], vendor=row["vendor"], arch=row["arch"],
               names=tuple(row["names"]), peak_tflops=dict(row.get("peak_tflops", {})),
               gemm_fp32_tflops=row.get("gemm_fp32_tflops"), source=row["source"],
               missing=dict(row.get("missing", {})),
               **{f: row.get(f) for f in FIELDS})


def by_key(key: str) -> Gpu:
    [gpu] = [g for g in gpus() if g.key == key]
    return gpu


@cache
def arch_limits(arch: str) -> ArchLimits | None:
    """The per-SM limits of an [arch.*] table, `like` applied; None for an unknown arch."""
    tables = raw_catalog().get("arch", {})
    if arch not in tables:
        return None
    merged: dict[str, Any] = {}
    chain: list[dict[str, Any]] = []
    at = tables.get(arch)
    while at is not None:
        chain.append(at)
        at = tables.get(at.get("like"))
    for part in reversed(chain):
        merged.update(part)

    def kib(name: str) -> int | None:
        return None if name not in merged else int(merged[name] * 1024)

    return ArchLimits(arch, int(merged.get("warp_size", 32)), merged.get("regs_per_sm"),
                      merged.get("max_regs_per_thread"), kib("smem_per_sm_kb"),
                      kib("max_smem_per_block_kb"), merged.get("max_warps_per_sm"),
                      merged.get("max_threads_per_sm"), merged.get("max_blocks_per_sm"),
                      merged.get("reg_alloc_unit"), merged.get("smem_alloc_unit"),
                      int(merged.get("reserved_smem_per_block", 0)),
                      merged.get("sub_partitions"), float(merged.get("fp32_gemm_share", 1.0)))


# ---- names -----------------------------------------------------------------------------

def words(name: str) -> tuple[str, ...]:
    """A name's words, lower-cased, vendor words dropped: 'NVIDIA H100 80GB HBM3' →
    ('h100', '80gb', 'hbm3')."""
    return tuple(w for w in re.findall(r"[a-z0-9]+", name.lower()) if w not in VENDOR_WORDS)


def resolve(name: str, what: str = "GPU") -> Gpu:
    """The one catalog row a name means (see the module docstring); GpuNameError else."""
    text = name.strip()
    if text.lower() in AMBIGUOUS_NAMES:
        raise GpuNameError(_ambiguous(what, text, list(AMBIGUOUS_NAMES[text.lower()])))
    query = words(text)
    if not query:
        raise GpuNameError(f"{what} {text!r} names no GPU (etl gpus lists the catalog)")
    exact = [g for g in gpus() if any(words(s) == query for s in (g.key, *g.names))]
    if len(exact) == 1:
        return exact[0]
    near = exact or [g for g in gpus() if any(_begins(query, words(s))
                                              for s in (g.key, g.model, *g.names))]
    if len(near) == 1:
        return near[0]
    if near:
        raise GpuNameError(_ambiguous(what, text, [g.key for g in near]))
    raise GpuNameError(f"{what} {text!r} is not in the GPU catalog (etl gpus lists it: "
                       f"{', '.join(g.key for g in gpus())}); add a row to etl/core/gpus.toml "
                       "with its datasheet")


def _begins(query: tuple[str, ...], spelled: tuple[str, ...]) -> bool:
    """Every word of the query begins a word of the spelling."""
    return all(any(w.startswith(q) for w in spelled) for q in query)


def _ambiguous(what: str, text: str, candidates: list[str]) -> str:
    return (f"{what} {text!r} is ambiguous: it may be {', '.join(candidates)}; name one of "
            "them (etl gpus lists the catalog)")


def trace_name_row(name: str | None) -> Gpu | None:
    """The row whose trace names hold `name` exactly (trimmed, any case); None else."""
    if name is None:
        return None
    key = name.strip().lower()
    return next((g for g in gpus() if key in {n.strip().lower() for n in g.names}), None)


# ---- occupancy -------------------------------------------------------------------------

def blocks_per_sm(limits: ArchLimits | None, threads: int | None, regs: int | None,
                  smem: int | None) -> int | None:
    """Blocks of a kernel resident on one SM at once (CUDA's occupancy rule with the default,
    largest carveout); None when a limit or a launch figure it needs is unknown, 0 when
    the block cannot run (too many registers or too much shared memory)."""
    if limits is None or threads is None or threads <= 0 or None in (
            limits.max_warps_per_sm, limits.max_blocks_per_sm):
        return None
    warps = math.ceil(threads / limits.warp_size)
    found = [int(limits.max_warps_per_sm or 0) // warps, int(limits.max_blocks_per_sm or 0)]
    by_regs = _register_limit(limits, warps, regs)
    by_smem = _smem_limit(limits, smem)
    if by_regs is None or by_smem is None:
        return None
    return min(found + [by_regs, by_smem])


def _register_limit(limits: ArchLimits, warps: int, regs: int | None) -> int | None:
    if regs is None:
        return None
    if regs == 0:
        return 1 << 30
    if None in (limits.regs_per_sm, limits.reg_alloc_unit, limits.sub_partitions,
                limits.max_regs_per_thread):
        return None
    unit, parts = int(limits.reg_alloc_unit or 1), int(limits.sub_partitions or 1)
    per_warp = math.ceil(regs * limits.warp_size / unit) * unit
    # the hardware check rounds the block's warps up to whole sub-partitions
    if (regs > int(limits.max_regs_per_thread or 0)
            or per_warp * math.ceil(warps / parts) * parts > int(limits.regs_per_sm or 0)):
        return 0
    warps_per_part = (int(limits.regs_per_sm or 0) // parts) // per_warp
    return (warps_per_part * parts) // warps


def _smem_limit(limits: ArchLimits, smem: int | None) -> int | None:
    if smem is None or limits.smem_per_sm is None or limits.smem_alloc_unit is None:
        return None
    if smem > int(limits.max_smem_per_block or 0):
        return 0
    unit = int(limits.smem_alloc_unit)
    used = math.ceil((smem + limits.reserved_smem_per_block) / unit) * unit
    return limits.smem_per_sm // used if used else 1 << 30
