"""Each family's field map: `etl/extract/<family>/fields.toml`, read once per process.

A field map is the data half of an extractor (raw key → column, units, step and layer
patterns); every family keeps its own in the same file name and reads it here. The files
are part of `extractor_version`: editing one re-ingests unchanged inputs.
"""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

EXTRACT_DIR = Path(__file__).resolve().parent


@cache
def field_map(family: str) -> dict[str, Any]:
    """The parsed fields.toml of `family` (kineto, nsys, xplane, monitor)."""
    with open(EXTRACT_DIR / family / "fields.toml", "rb") as fh:
        return tomllib.load(fh)
