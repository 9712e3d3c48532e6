"""layer_kind, pass and layer_status of GPU activities whose layer is simply the scope that
encloses them (xplane_pb, nsys_sqlite, nsys_gpu_trace_csv); Kineto traces resolve theirs
in etl/extract/kineto/layers.py (backward kernels take their forward op's layer).

    layer                      launch   layer_kind   pass (xplane rules)   layer_status
    model/dense                yes      name_scope   forward               enclosing_scope
    gradient_tape/model/dense  yes      name_scope   backward              enclosing_scope
    NULL                       yes      NULL         NULL                  no_scope
    NULL                       NULL     NULL         NULL                  no_launch
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

NULL_TEXT = pa.scalar(None, pa.string())


def with_layer_columns(kernels: pa.Table, layer_kind: str,
                       pass_patterns: dict[str, str] | None) -> pa.Table:
    """`kernels` (with layer and launch_event_id) plus layer_kind, pass and layer_status.

    `pass_patterns`: pass → regex matched against each component of the layer (the first
    pass that matches wins; a layer that none matches is forward); None: the format does not
    tell passes apart (pass NULL).
    """
    layer = kernels["layer"]
    has_layer = pc.is_valid(layer)
    status = pc.if_else(has_layer, "enclosing_scope", pc.if_else(
        pc.is_valid(kernels["launch_event_id"]), "no_scope", "no_launch"))
    return (kernels.append_column("layer_kind", pc.if_else(has_layer, layer_kind, NULL_TEXT))
            .append_column("pass", _passes(layer, pass_patterns))
            .append_column("layer_status", status))


def _passes(layer: Any, patterns: dict[str, str] | None) -> Any:
    if patterns is None:
        return pa.nulls(len(layer), pa.string())
    found = pc.if_else(pc.is_valid(layer), "forward", NULL_TEXT)
    for name, pattern in reversed(patterns.items()):  # the first that matches wins
        component = "(^|/)(" + pattern.strip("^$") + ")(/|$)"
        found = pc.if_else(pc.fill_null(pc.match_substring_regex(layer, component), False),
                           name, found)
    return found

