"""The link catalog (etl/core/links.toml): what a collective moves over between GPUs.

Each link gives the GB/s one GPU sends in one direction (`per_gpu_gbs`, what a ring
collective's bus bandwidth is bounded by) and NCCL's per-step latency for its kind of
hardware. `typical_link(gpu_name)` is the link the GPUs of one machine usually share
for a device name (NVLink for SXM parts, PCIe for cards); a name it does not know gets
None, never a guess.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from etl.core.errors import EtlError

CATALOG = Path(__file__).with_name("links.toml")
FAMILIES = {"nvlink": "node", "pcie": "node", "infinity_fabric": "node",
            "infiniband": "network", "roce": "network"}


class LinkError(EtlError):
    """A link the catalog does not hold, or a catalog that breaks its rules."""


@dataclass(frozen=True)
class Link:
    key: str
    family: str
    scope: str             # node or network
    per_gpu_gbs: float     # GB/s one GPU sends in one direction
    step_latency_us: float
    typical_for: tuple[str, ...]
    source: str
    confidence: str

    @property
    def bytes_per_ns(self) -> float:
        return self.per_gpu_gbs  # 1 GB/s = 1 byte/ns


@cache
def links() -> dict[str, Link]:
    with open(CATALOG, "rb") as fh:
        doc = tomllib.load(fh)
    found = problems(doc)
    if found:
        raise LinkError(f"{CATALOG}: {'; '.join(found)}")
    return {e["key"]: Link(e["key"], e["family"], e["scope"], float(e["per_gpu_gbs"]),
                           float(e["step_latency_us"]), tuple(e.get("typical_for", [])),
                           e["source"], e["confidence"]) for e in doc["link"]}


def problems(doc: dict[str, Any]) -> list[str]:
    """What breaks the catalog's rules: a key once, a known family in its scope, positive
    finite figures, a source and a confidence."""
    found: list[str] = []
    seen: set[str] = set()
    for entry in doc.get("link", []):
        key = entry.get("key", "?")
        if key in seen:
            found.append(f"{key}: listed twice")
        seen.add(key)
        if FAMILIES.get(entry.get("family", "")) != entry.get("scope"):
            found.append(f"{key}: family must be one of {sorted(FAMILIES)} with its scope")
        for field in ("per_gpu_gbs", "step_latency_us"):
            value = entry.get(field)
            if not isinstance(value, (int, float)) or not 0 < value < math.inf:
                found.append(f"{key}: {field} = {value!r} is not a positive number")
        if not str(entry.get("source", "")).strip():
            found.append(f"{key}: needs a source")
        if entry.get("confidence") not in ("primary", "secondary"):
            found.append(f"{key}: confidence is primary or secondary")
    return found


def link(key: str) -> Link:
    """The catalog's link `key`, or a LinkError that lists the keys."""
    found = links().get(key)
    if found is None:
        raise LinkError(f"no link {key!r} in etl/core/links.toml; one of "
                        f"{', '.join(sorted(links()))} (etl links lists them)")
    return found


def typical_link(gpu_name: str | None) -> Link | None:
    """The link the GPUs of one machine usually share, for a device name; None if unknown."""
    if not gpu_name:
        return None
    name = gpu_name.strip().lower()
    hits = [lk for lk in links().values() if lk.scope == "node"
            and any(pattern in name for pattern in lk.typical_for)]
    return max(hits, key=lambda lk: max(len(p) for p in lk.typical_for if p in name),
               default=None)
