"""Print tests/TRUST.md: what the trust tests try, what holds, which bugs are known.

    .venv/bin/python tests/report_trust.py > tests/TRUST.md

Counts come from tests/data/broken/EXPECTED.toml and the tests' own constants and marks,
so the table says what a green suite proves: "held" cases pass, "known bugs" are
xfail(strict=True) and turn the suite red once fixed. tests/load/test_broken.py fails when
TRUST.md is out of date.
"""
from __future__ import annotations

import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXPECTED = ROOT / "tests" / "data" / "broken" / "EXPECTED.toml"


def kill_points() -> tuple[int, int]:
    """(SIGKILLs, trace MB) of tests/warehouse/test_atomic.py."""
    from tests.warehouse import test_atomic

    return test_atomic.KILLS, test_atomic.TRACE_MB


def test_cases(module: Any) -> tuple[int, list[str]]:
    """(cases expected to pass, xfail reasons) over a module's tests and their params."""
    held, bugs = 0, []
    for name in dir(module):
        func = getattr(module, name)
        if not (name.startswith("test_") and callable(func)):
            continue
        marks = getattr(func, "pytestmark", [])
        whole = [m.kwargs["reason"] for m in marks if m.name == "xfail"]
        params = [p for m in marks if m.name == "parametrize" for p in m.args[1]]
        for param in params or [None]:
            own = [m.kwargs["reason"] for m in getattr(param, "marks", ()) if m.name == "xfail"]
            reasons = whole + own
            bugs.extend(r for r in reasons if r not in bugs)
            held += not reasons
    return held, bugs


def corpus() -> dict[str, dict[str, Any]]:
    return tomllib.loads(EXPECTED.read_text())


Row = tuple[str, str, str, int, str, str]  # area, tried, held, bugs, tests, tried in short


def _rows() -> tuple[list[Row], list[str]]:
    """(table rows, known-bug lines) from the suite's own constants and xfail marks."""
    from tests.extract.kineto import test_fuzz
    from tests.load import test_hostile
    from tests.load import test_undecodable_names as test_names
    from tests.warehouse import test_atomic, test_concurrent

    cases = corpus()
    kinds = Counter(spec["kind"] for spec in cases.values())
    formats = Counter(name.split("-")[0] for name in cases)
    corpus_bugs = [spec["bug"] for spec in cases.values() if "bug" in spec]
    conc_held, conc_bugs = test_cases(test_concurrent)
    host_held, host_bugs = test_cases(test_hostile)
    name_held, name_bugs = test_cases(test_names)
    fuzz_held, fuzz_bugs = test_cases(test_fuzz)
    c, h, f, a = test_concurrent, test_hostile, test_fuzz, test_atomic
    rows: list[Row] = [
        ("broken inputs", f"{len(cases)} named files and folders ({kinds['unreadable']} "
         f"unreadable, {kinds['odd']} odd; " + ", ".join(
             f"{n} {k}" for k, n in sorted(formats.items())) + ")",
         f"{len(cases) - len(corpus_bugs)} inputs", len(corpus_bugs),
         "tests/load/test_broken.py, tests/data/broken/", f"{len(cases)} inputs"),
        ("kill points", f"{a.KILLS} SIGKILLs of `etl ingest` (with its slice worker "
         f"processes) at random moments over a generated trace of {a.TRACE_MB} MB, then a "
         "final ingest", f"{a.KILLS} kills", 0, "tests/warehouse/test_atomic.py",
         f"{a.KILLS} SIGKILLs, trace of {a.TRACE_MB} MB"),
        ("concurrent writers", f"re-ingest twice and after a change (row counts of all "
         f"{len(c.TABLES)} run tables); {c.WRITERS} writers started together (different "
         f"runs, the same run, overlapping sets); {c.FRESH_WRITERS} writers x "
         f"{c.FRESH_ROUNDS} fresh warehouses; {c.REPUBLISHES} republishes under "
         f"{c.DUCKDB_READERS + 1} polling `etl query` readers, {c.SHELL_REPUBLISHES} under "
         f"{c.DUCKDB_READERS} DuckDB shell readers; "
         f"{c.MANY_RUNS} runs in one command x {c.MANY_ROUNDS}", f"{conc_held} tests",
         len(conc_bugs), "tests/warehouse/test_concurrent.py",
         f"up to {c.FRESH_WRITERS} writers, {c.REPUBLISHES} republishes under readers"),
        ("hostile metadata", f"{len(h.HOSTILE_NAMES)} run names, {len(h.HOSTILE_VALUES)} "
         f"run.toml values + {len(h.HOSTILE_TAGS)} tags, trace file names, `.`/`..` "
         "paths, non-UTF-8 file and folder names (also under an ASCII locale), 5 warehouse "
         "folder names, 3 gzip bombs (made at test time)", f"{host_held + name_held} tests",
         len(host_bugs) + len(name_bugs),
         "tests/load/test_hostile.py, tests/load/test_undecodable_names.py",
         "names, values, paths, non-UTF-8 names, gzip bombs"),
        ("fuzzing", f"{sum(f.FUZZ_EXAMPLES.values())} hypothesis examples over "
         f"{len(f.FUZZ_EXAMPLES)} properties (derandomized), and their findings",
         f"{fuzz_held} tests", len(fuzz_bugs), "tests/extract/kineto/test_fuzz.py",
         f"{sum(f.FUZZ_EXAMPLES.values())} examples"),
    ]
    bugs = [f"`{name}`: {spec['bug'].removeprefix('BUG: ')}" for name, spec in cases.items()
            if "bug" in spec]
    bugs += [reason.removeprefix("BUG: ")
             for reason in conc_bugs + host_bugs + name_bugs + fuzz_bugs]
    return rows, bugs


def _table(rows: list[Row], detailed: bool) -> list[str]:
    if detailed:
        return ["| area | tried | held | known bugs | tests |", "|---|---|---|---|---|",
                *(f"| {a} | {t} | {held} | {n} | {w} |" for a, t, held, n, w, _ in rows)]
    return ["| area | tried | held | open (xfail) |", "|---|---|---|---|",
            *(f"| {a} | {short} | {held} | {n} |" for a, _, held, n, _, short in rows)]


def render() -> str:
    rows, bugs = _rows()
    lines = [
        "# Trust: what was tried, and what held",
        "",
        "Generated by `.venv/bin/python tests/report_trust.py` (writes this file and the "
        "table in README.md); tests/load/test_broken.py fails when either is stale. With the "
        "suite green, \"held\" cases pass and every known bug or limit is an "
        "`xfail(strict=True)` that fails the suite once fixed (then delete its mark or its "
        "`bug` line).",
        "",
        *_table(rows, detailed=True),
        "",
        "## Known bugs and limits (xfail reasons)",
        "",
        *(f"- {bug}" for bug in bugs),
        "",
    ]
    return "\n".join(lines)


README = ROOT / "README.md"
BEGIN = "<!-- trust table: generated by tests/report_trust.py -->"
END = "<!-- end of trust table -->"


def readme_with_table(text: str) -> str:
    """README.md with the short table between its markers replaced by today's."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    table = "\n".join(_table(_rows()[0], detailed=False))
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


if __name__ == "__main__":
    (ROOT / "tests" / "TRUST.md").write_text(render())
    README.write_text(readme_with_table(README.read_text()))
