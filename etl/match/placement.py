"""Which iteration an ncu export sits on when several iterations match it equally well.

An export of one training step matches every step whose kernels are identical (same
names, grids and blocks in the same order): the alignment (align.py) cannot tell them
apart and keeps the earliest, often a warm-up step. Here the matched kernels of one
iteration are moved, as a block, to an equivalent iteration chosen in this order:
1. the iteration run.toml names (`ncu_iteration = 3`: the step that was profiled);
2. the iteration run_summary selects for that trace (the same SQL, run over the run's
   staged tables), so that run_summary and the ncu levels describe one step;
3. the latest equivalent iteration (warm-up steps come first).
Each such choice is an anomaly `ncu_equivalent_iterations` naming the candidates and the
reason; nothing moves unless the two iterations hold identical kernels one for one.

Before/after (iterations 1 and 3 identical, run.toml says 3):

    kernel row  iteration  ncu_id (align.py)  ncu_id (placed)
    0           1          0                  NULL
    1           1          1                  NULL
    2           3          NULL               0
    3           3          NULL               1
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa


IDENTITY = ["name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
OUTCOME = ["ncu_id", "match_status", "reason", "score"]


@dataclass(frozen=True)
class Placement:
    iteration: int            # where the export was put
    aligned: int              # where align.py put it
    candidates: list[int]     # equivalent iterations, both of the above included
    why: str                  # run.toml, run_summary, latest


def place(trace: pa.Table, result: pa.Table, ncu_iteration: int | None,
          selected: Callable[[], dict[int, int | None]]) -> tuple[pa.Table, Placement | None]:
    """`result` of align.match_kernels with its matches moved to the preferred equivalent
    iteration (see the module docstring); `selected()` gives run_summary's selected
    iteration per trace source, asked only when there is a choice to make."""
    rows = _matched_block(trace, result)
    if rows is None:
        return result, None
    source, iteration, block = rows
    equivalent = _equivalent_iterations(trace, source, iteration, block)
    if not equivalent:
        return result, None
    candidates = sorted([iteration, *equivalent])
    target, why = _preferred(candidates, ncu_iteration, lambda: selected().get(source))
    if target != iteration:
        result = _swap(result, block, equivalent[target])
    return result, Placement(target, iteration, candidates, why)


def _matched_block(trace: pa.Table, result: pa.Table
                   ) -> tuple[int, int, np.ndarray] | None:
    """(source, iteration, trace rows of that iteration) when every matched kernel lies in
    one iteration of one source."""
    import pyarrow.compute as pc

    matched = np.flatnonzero(np.asarray(pc.equal(result["match_status"], "matched")
                                        .fill_null(False).to_numpy(zero_copy_only=False)))
    if len(matched) == 0:
        return None
    positions = np.asarray(result["kernel_id"].to_numpy(zero_copy_only=False))[matched]
    sources = set(trace["source_id"].take(positions).to_pylist())
    iterations = set(trace["iteration"].take(positions).to_pylist())
    if len(sources) != 1 or len(iterations) != 1 or None in iterations:
        return None
    source, iteration = sources.pop(), iterations.pop()
    return source, iteration, _rows_of(trace, source, iteration)


def _rows_of(trace: pa.Table, source: int, iteration: int) -> np.ndarray:
    import pyarrow.compute as pc

    mask = pc.and_(pc.equal(trace["source_id"], source), pc.equal(trace["iteration"], iteration))
    return np.flatnonzero(np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False)))


def _equivalent_iterations(trace: pa.Table, source: int, iteration: int, block: np.ndarray
                           ) -> dict[int, np.ndarray]:
    """Other iterations of the source whose kernels equal the block's one for one."""
    import pyarrow as pa

    identity = trace.select(IDENTITY)
    mine = identity.take(pa.array(block)).to_pylist()
    found: dict[int, np.ndarray] = {}
    others = {i for i in trace["iteration"].to_pylist() if i is not None} - {iteration}
    for other in sorted(others):
        rows = _rows_of(trace, source, other)
        if len(rows) == len(block) and identity.take(pa.array(rows)).to_pylist() == mine:
            found[other] = rows
    return found


def _preferred(candidates: list[int], ncu_iteration: int | None,
               selected: Callable[[], int | None]) -> tuple[int, str]:
    if ncu_iteration is not None and ncu_iteration in candidates:
        return ncu_iteration, "run.toml ncu_iteration"
    chosen = selected()
    if chosen is not None and chosen in candidates:
        return chosen, "the iteration run_summary selects"
    return candidates[-1], "the latest"


def _swap(result: pa.Table, block: np.ndarray, target: np.ndarray) -> pa.Table:
    """The outcomes of two identical iterations exchanged row for row (result rows are
    indexed by trace row: kernel_id)."""
    import pyarrow as pa

    position = {int(k): i for i, k in enumerate(result["kernel_id"].to_pylist())}
    order = np.arange(result.num_rows)
    for a, b in zip(block.tolist(), target.tolist()):
        order[position[a]], order[position[b]] = position[b], position[a]
    taken = pa.array(order)
    for column in OUTCOME:
        index = result.schema.get_field_index(column)
        result = result.set_column(index, column, result[column].take(taken))
    return result


def describe(placement: Placement, ncu_source_id: int) -> str:
    """The anomaly detail for a placement among equivalent iterations."""
    listed = ", ".join(map(str, placement.candidates))
    moved = ("" if placement.aligned == placement.iteration
             else f"; the alignment alone took iteration {placement.aligned}")
    return (f"ncu export {ncu_source_id} matches iterations {listed} equally well (identical "
            f"kernels); placed on iteration {placement.iteration}: {placement.why}{moved}")


def run_summary_selection(tables: dict[str, pa.Table]) -> dict[int, int | None]:
    """run_summary's selected iteration per trace source (of its busiest device), from the
    view's own SQL over the run's staged tables: the rule is written once, in sql/views."""
    import duckdb

    from etl.core.sql_files import discover, needed_by

    needed = needed_by("run_summary", discover())
    con = duckdb.connect()
    try:
        for name, table in tables.items():
            con.register(name, table)
        for view in needed:
            con.execute(f"CREATE VIEW {view.name} AS {view.select}")
        rows = con.execute(f"SELECT source_id, selected_iteration FROM {needed[-1].name} "
                           "ORDER BY source_id, kernel_count").fetchall()
    finally:
        con.close()
    return {source: iteration for source, iteration in rows}  # the busiest device last
