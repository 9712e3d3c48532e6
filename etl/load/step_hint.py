"""A trace source without step markers: the anomaly no_step_markers, with the run's own
candidates for run.toml's step_pattern.

Such a source is one iteration window over the whole trace (iterations.boundary
whole_trace): its gpu_util counts setup, teardown and the gaps between steps as idle, and
says nothing of a step. The candidates are the outermost host events of the categories
the format's field map names ([steps] hint_categories: Kineto user annotations, nsys NVTX
ranges, xplane TraceMe events) whose names, of at most MARKER_CHARS characters, repeat,
grouped by their shape (digit runs read as <n>), the shapes with a varying number first,
then the most frequent:

    names (NVTX)                       shape           count   suggestion
    train_batch 0 … train_batch 9      train_batch <n> 10      step_pattern = '^train_batch (\\d+)$'
    forward, forward, ...              forward         10      (no number: not a step number)

A pattern is suggested for a shape whose every event has a name of its own (as step
markers do; line and sequence numbers repeat). It captures, as group 1, the number that
takes the most values among the names (`epoch 1 step 3`: the step), and is checked
against them: it matches every name of its shape, at the start and whole
(etl/extract/step_names.py). Only the formats whose steps step_pattern sets get a pattern
(xplane's come from step_num events).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KIND = "no_step_markers"
NOTE = "no steps"
SHOWN = 3               # candidate shapes named in the anomaly
NAMES_READ = 200        # distinct names of a shape read to place group 1
MARKER_CHARS = 80       # a longer name is no step marker: not a candidate
_DIGITS = re.compile(r"[0-9]+")
_META = set(".^$*+?{}[]\\|()")


@dataclass(frozen=True)
class Candidate:
    shape: str          # the name with each digit run as <n>
    count: int          # events of this shape
    distinct: int       # distinct names among them
    names: list[str]    # distinct names in natural order (at most NAMES_READ)

    @property
    def numbered(self) -> bool:
        return self.distinct > 1 and "<n>" in self.shape

    @property
    def one_per_step(self) -> bool:
        """Each event has a name of its own (step markers do; line numbers, sequence
        numbers and the like repeat)."""
        return self.numbered and self.distinct == self.count


def pattern_for(names: list[str]) -> str | None:
    """The step_pattern that matches every name whole, group 1 on the number that varies
    most among them; None when the names carry no number or differ beyond their digits."""
    parts = [_DIGITS.split(n) for n in names]
    numbers = [_DIGITS.findall(n) for n in names]
    if not numbers or not numbers[0] or any(p != parts[0] for p in parts):
        return None
    spread = [len({n[i] for n in numbers}) for i in range(len(numbers[0]))]
    group = max(range(len(spread)), key=lambda i: (spread[i], i))
    pieces = [_escape(parts[0][0])]
    for i, text in enumerate(parts[0][1:]):
        pieces += ["(\\d+)" if i == group else "\\d+", _escape(text)]
    pattern = "^" + "".join(pieces) + "$"
    return pattern if all(re.match(pattern, n) for n in names) else None


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _META else c for c in text)


def toml_string(text: str) -> str:
    """`text` as a TOML string a user can paste into run.toml."""
    if "'" not in text and "\n" not in text:
        return f"'{text}'"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def candidates(host_events: Path, source_id: int, categories: list[str]) -> list[Candidate]:
    """The repeated shapes among the source's outermost host events of `categories`."""
    import duckdb

    if not categories or not host_events.exists():
        return []
    con = duckdb.connect()
    try:
        rows = con.execute(f"""
            WITH h AS (SELECT * FROM read_parquet($file) WHERE source_id = $source),
            outermost AS (
                SELECT e.name FROM h AS e LEFT JOIN h AS p ON p.event_id = e.parent_event_id
                WHERE list_contains($categories, e.category)
                  AND length(e.name) <= {MARKER_CHARS}
                  AND (p.event_id IS NULL OR NOT list_contains($categories, p.category)))
            SELECT regexp_replace(name, '[0-9]+', '<n>', 'g') AS shape, count(*) AS n,
                   count(DISTINCT name) AS distinct_names,
                   list_sort(list_distinct(list(name)))[1:{NAMES_READ}] AS names
            FROM outermost GROUP BY shape HAVING count(*) >= 2
            ORDER BY count(DISTINCT name) > 1 DESC, n DESC, shape LIMIT {SHOWN}""",
            {"file": str(host_events), "source": source_id,
             "categories": categories}).fetchall()
    finally:
        con.close()
    return [Candidate(shape, n, distinct, sorted(names, key=_natural))
            for shape, n, distinct, names in rows]


def _natural(name: str) -> list[tuple[int, int, str]]:
    """A sort key: iteration2 before iteration10."""
    return [(1, int(part), "") if part.isdigit() else (0, 0, part)
            for part in re.split(r"([0-9]+)", name)]


def detail(found: list[Candidate], steps: dict[str, Any]) -> str:
    """The anomaly's text: what a whole-trace window means, the candidates, the remedy."""
    settable = steps.get("step_pattern", True)
    what = steps.get("hint_what", "host events")
    text = ("no step markers: one iteration window over the whole trace (iterations.boundary "
            "whole_trace), so gpu_util and idle time cover the whole session, setup and the "
            "gaps between steps included. ")
    if found:
        text += f"Repeated {what}: " + "; ".join(_item(c, settable) for c in found) + ". "
    else:
        text += f"No {what} repeats. "
    remedy = steps.get("hint_remedy", "")
    if settable:
        return text + ("Set step_pattern in run.toml (a regex matched at the start of the "
                       "name, group 1 the step number) to make such names the iterations; "
                       f"else {remedy}.")
    return text + f"To get steps, {remedy} (run.toml step_pattern does not apply here)."


def _item(c: Candidate, settable: bool) -> str:
    if not c.numbered:
        return f"{c.names[0]!r} ×{c.count} (no number in the name)"
    span = f"{c.names[0]!r} … {c.names[-1]!r}"
    pattern = pattern_for(c.names) if c.one_per_step else None
    if pattern is None or not settable:
        return f"{c.shape!r} ×{c.count} ({span})"
    return f"{c.shape!r} ×{c.count} ({span}): step_pattern = {toml_string(pattern)}"


def suggestion(text: str) -> str | None:
    """The first `step_pattern = ...` an anomaly's detail suggests, if any (etl runs reads
    it with the same regex: etl/cli/commands.py RUNS_SQL)."""
    found = re.search(r"step_pattern = ('[^']*'|\"[^\"]*\")", text)
    return found.group(0) if found else None


def for_source(host_events: Path, source_id: int, family: str) -> str:
    """The anomaly's detail for one source of a format `family` (its field map's [steps])."""
    from etl.extract.fields import field_map

    steps = field_map(family).get("steps", {})
    return detail(candidates(host_events, source_id, list(steps.get("hint_categories", []))),
                  steps)


def remark(text: str) -> tuple[str, str]:
    """What the ingest's output says of such a source: its summary note and warning."""
    hint = suggestion(text) or "no step_pattern candidate among its repeated names"
    return (NOTE, f"no step markers, one window over the whole trace ({hint}; anomaly "
                  f"{KIND})")
