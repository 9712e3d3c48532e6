"""Layer kinds, passes, and the layer of backward kernels, for Kineto traces.

Rules (fields.toml [layers], [layer_kinds], [passes]):
- scope kind of a host event: `module` (python_function `nn.Module: X`), `optimizer` /
  `communication` (a user_annotation whose name matches that [layer_kinds] pattern),
  `user_annotation` (any other record_function label but a step marker: ProfilerStep#N
  and run.toml's step_pattern, tables.StepMarkers), `backward` (a
  cpu_op run by the autograd engine: "Fwd thread id" > 0, or without that argument named
  `autograd::engine::evaluate_function: ...`), else NULL. Every scope is a layer scope for
  the linker; backward ops and optimizer scopes are also its marks (they decide the pass).
- pass of a host event: its innermost mark's kind (itself included: backward, optimizer);
  else forward when it is, or lies inside, a cpu_op or a layer scope; else NULL.
- forward op: a cpu_op with a "Sequence number" that is not a backward op.
- layer of a launch whose innermost scope is a backward op: the layer of the forward op
  with the same sequence number in the same process (the latest-starting one, as the
  profiler's own fwd-bwd flows pick it). Sequence numbers count per forward thread, and
  forward ops do not say which thread's counter they used (their "Fwd thread id" is 0), so
  a number used by forward ops on two threads of one process links to nothing.

    launch inside                   layer                 layer_kind       layer_status
    nn.Module: Lin > aten::linear   nn.Module: Lin        module           enclosing_scope
    ...Backward0 (seq 7)            the fwd op 7's layer  its kind         forward_op
    ...AccumulateGrad (no seq)      NULL                  NULL             no_sequence_number
    ...Backward0 (seq 9, no fwd op) NULL                  NULL             forward_op_not_in_trace
    aten::mm, no scope              NULL                  NULL             no_scope
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from etl.extract.fields import field_map

BACKWARD = "backward"
NULL_TEXT = pa.scalar(None, pa.string())
MARK_KINDS = pa.array([BACKWARD, "optimizer"], pa.string())


def scope_kinds(host: pa.Table, step_markers: Any) -> Any:
    """The scope kind of each host row (category, name, fwd_thread_id), NULL for none;
    `step_markers`: the rows that mark steps (boolean), never scopes."""
    names, cats = host["name"], host["category"]
    kind = pa.nulls(host.num_rows, pa.string())
    annotation = pc.and_(pc.is_in(cats, pa.array(field_map("kineto")["layers"]
                                                 ["annotation_categories"])),
                         pc.and_(pc.invert(step_markers),
                                 pc.greater(pc.utf8_length(names), 0)))
    kind = _where(annotation, "user_annotation", kind)
    for name, pattern in reversed(field_map("kineto")["layer_kinds"].items()):  # the first wins
        kind = _where(pc.and_(annotation, pc.match_substring_regex(names, pattern)), name,
                      kind)
    module = pc.and_(pc.equal(cats, "python_function"),
                     pc.starts_with(names, field_map("kineto")["layers"]["module_prefix"]))
    kind = _where(module, "module", kind)
    return _where(_is_backward_op(host), BACKWARD, kind)


def _where(mask: Any, value: str, otherwise: Any) -> Any:
    return pc.if_else(pc.fill_null(mask, False), value, otherwise)


def _is_backward_op(host: pa.Table) -> Any:
    spec = field_map("kineto")["passes"]
    op = pc.is_in(host["category"], pa.array(spec["backward_op_categories"]))
    by_thread = pc.greater(host["fwd_thread_id"], 0)
    by_name = pc.starts_with(host["name"], spec["backward_prefix"])
    return pc.and_(op, pc.fill_null(pc.coalesce(by_thread, by_name), False))


def is_forward_op(host: pa.Table, kinds: Any) -> Any:
    """cpu_ops with a sequence number that are not backward ops."""
    backward = field_map("kineto")["passes"]["backward_op_categories"]
    op = pc.is_in(host["category"], pa.array(backward))
    forward = pc.and_(op, pc.is_valid(host["sequence_number"]))
    return pc.fill_null(pc.and_(forward, pc.invert(pc.equal(pc.fill_null(kinds, ""),
                                                            BACKWARD))), False)


def is_wrapper_op(host: pa.Table, is_op: Any) -> Any:
    """The ops that yield the kernel's op to any other op enclosing the launch
    (fields.toml [ops] wrappers: torch.compile's)."""
    spec, names = field_map("kineto")["ops"], host["name"]
    wrapper = pc.is_in(names, pa.array(spec["wrappers"], pa.string()))
    for prefix in spec["wrapper_prefixes"]:
        wrapper = pc.or_(wrapper, pc.starts_with(names, prefix))
    return pc.fill_null(pc.and_(is_op, wrapper), False)


def is_mark(kinds: Any) -> Any:
    return pc.fill_null(pc.is_in(kinds, MARK_KINDS), False)


def passes(mark_kind: Any, inside_op_or_scope: Any) -> pa.Array:
    """Pass from the innermost mark's kind; forward where no mark but an op or scope."""
    forward = pc.if_else(pc.fill_null(inside_op_or_scope, False), "forward", NULL_TEXT)
    return pc.coalesce(pc.cast(mark_kind, pa.string()), forward)


def with_own_mark(mark_kind: Any, kinds: Any) -> Any:
    """The innermost mark's kind of each row (NULL: none linked); a marked row is its own
    mark, linked or not (an untimed backward op is backward)."""
    return pc.coalesce(mark_kind, pc.if_else(is_mark(kinds), kinds, NULL_TEXT))


def launch_columns(scope: pa.Table, pass_: Any) -> dict[str, Any]:
    """What RESOLVE reads of launch calls besides their ids: from the row of each one's
    innermost layer scope (name, scope_kind, sequence_number, pid) and its pass. A backward
    op names no layer itself; its forward op's layer is resolved."""
    backward = pc.fill_null(pc.equal(scope["scope_kind"], BACKWARD), False)
    return {"layer": pc.if_else(backward, NULL_TEXT, scope["name"]),
            "layer_kind": scope["scope_kind"], "pass": pass_, "pid": scope["pid"],
            "backward_seq": scope["sequence_number"]}


def forward_ops(events: pa.Table, scope: pa.Table) -> pa.Table:
    """The {forward} of RESOLVE: forward ops `events` (pid, tid, sequence_number, ts_ns,
    event_id) with their innermost layer scope's name and kind (`scope`, row by row)."""
    table = events.select(["pid", "tid", "sequence_number", "ts_ns", "event_id"])
    table = table.append_column("layer", scope["name"])
    return table.append_column("layer_kind", scope["scope_kind"])


# The layer of every launch (kept columns + layer, layer_kind, layer_status); {launches}
# has layer, layer_kind (BACKWARD when the innermost scope is a backward op), pid and
# backward_seq; {forward} the forward ops with pid, tid, sequence_number, ts_ns, event_id,
# layer and layer_kind. Hash joins: linear in the rows, out of core in DuckDB.
RESOLVE = """
WITH latest AS (
    SELECT coalesce(pid, '') AS pid_key, sequence_number,
           count(DISTINCT coalesce(tid, '')) AS threads,
           arg_max(event_id, (ts_ns, event_id)) AS forward_id
    FROM {forward} GROUP BY ALL),
chosen AS (
    SELECT l.pid_key, l.sequence_number, l.threads, f.layer, f.layer_kind
    FROM latest l JOIN {forward} f ON f.event_id = l.forward_id)
SELECT l.* EXCLUDE (layer, layer_kind, pid, backward_seq),
    CASE WHEN l.layer_kind = 'backward' THEN
        CASE WHEN c.threads = 1 AND c.layer_kind <> 'backward' THEN c.layer END
        ELSE l.layer END AS layer,
    CASE WHEN l.layer_kind = 'backward' THEN
        CASE WHEN c.threads = 1 AND c.layer_kind <> 'backward' THEN c.layer_kind END
        ELSE l.layer_kind END AS layer_kind,
    CASE WHEN l.layer_kind IS NULL THEN 'no_scope'
        WHEN l.layer_kind <> 'backward' THEN 'enclosing_scope'
        WHEN l.backward_seq IS NULL THEN 'no_sequence_number'
        WHEN c.threads IS NULL THEN 'forward_op_not_in_trace'
        WHEN c.threads > 1 THEN 'ambiguous_forward_thread'
        WHEN c.layer IS NULL OR c.layer_kind = 'backward' THEN 'forward_op_without_scope'
        ELSE 'forward_op' END AS layer_status
FROM {launches} l
LEFT JOIN chosen c ON l.layer_kind = 'backward' AND c.pid_key = coalesce(l.pid, '')
    AND c.sequence_number = l.backward_seq
"""


def resolve_sql(launches: str, forward: str) -> str:
    """The RESOLVE query over two relations (table names or read_parquet(...) calls)."""
    return RESOLVE.format(launches=launches, forward=forward)


def resolve_layers(con: Any, launches: str, forward: str) -> Any:
    return con.execute(resolve_sql(launches, forward))
