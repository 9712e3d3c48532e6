"""Step markers by name: which host events or ranges are iterations, and their number N.

A format's own patterns (Kineto: fields.toml [steps]; nsys: fields.toml [steps]) find the
markers unless run.toml sets `step_pattern`, which then replaces them: the pattern alone.
A name is a marker when a pattern matches at its start (Python's `re.match`; end it with
`$` to match the whole name); the first pattern that matches gives N, its group 1.

    name             step_pattern = 'train_step (\\d+)'   default (Kineto)
    train_step 3     3                                     not a marker
    train_step 3 b   3 (matched at the start)              not a marker
    my train_step 3  not a marker                          not a marker
    ProfilerStep#3   not a marker                          3

A name that matches but whose group 1 is not a whole number below 2^63 (`train_step x`
with 'train_step (\\w+)') raises StepNumberError: the pattern is wrong for this trace, and
guessing would invent or lose an iteration.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


class StepNumberError(ValueError):
    """A step marker's group 1 is not a number (picklable: raised in slice workers)."""

    def __init__(self, name: str, group: str | None) -> None:
        super().__init__(name, group)
        self.name, self.group = name, group

    def problem(self) -> str:
        return (f"the step pattern matches the event name {self.name[:80]!r} but its group 1 "
                f"({self.group!r}) is not an iteration number")


STEP_NUMBER_REMEDY = "make group 1 of run.toml's step_pattern match digits only, e.g. (\\d+)"


@dataclass(frozen=True)
class StepNames:
    """The patterns of step markers' names, in order of preference (strings: picklable)."""

    patterns: tuple[str, ...]

    @staticmethod
    def of(custom: str | None, defaults: list[str]) -> StepNames:
        """run.toml's step_pattern alone when set, else the format's own patterns."""
        return StepNames((custom,) if custom is not None else tuple(defaults))

    def number(self, name: str) -> int | None:
        """N of a marker's name; None when the name is not a marker."""
        for pattern in self.patterns:
            if (match := _compiled(pattern).match(name)) is not None:
                return _number(name, match)
        return None

    def numbers(self, names: Any) -> Any:
        """N of each name of an Arrow string array, NULL for names that are not markers.
        The patterns run once per distinct name (names repeat: ops, annotations)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        distinct = pc.unique(names).drop_null()
        found = pa.array([self.number(n) for n in distinct.to_pylist()], pa.int64())
        return pc.take(found, pc.index_in(names, value_set=distinct))

    def matches(self, names: Any) -> Any:
        """Boolean Arrow array: the names that are markers (NULL names are not)."""
        import pyarrow.compute as pc

        return pc.is_valid(self.numbers(names))


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _number(name: str, match: re.Match[str]) -> int:
    group = match.group(1)
    if group is None or not group.isdecimal() or int(group) >= 1 << 63:
        raise StepNumberError(name, group)
    return int(group)
