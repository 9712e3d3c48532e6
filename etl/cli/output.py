"""Terminal output: progress bar, summary table, query results."""
from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from etl.core.errors import counted, one_line
from etl.extract import progress as file_progress

if TYPE_CHECKING:  # `etl query` prints through this module without the ingest's imports
    from etl.load.ingest import RunResult


@contextmanager
def progress(total: int | None = None) -> Iterator[Callable[[RunResult], None]]:
    """A progress bar (a line per run where stderr is no terminal); the callable it yields
    takes each run's result as it ends. The total may come later: `advance.start(n)`."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=total)
        done, expected = [0], [total]
        if console.is_terminal:  # within a big trace: its bytes and passes, not just "0/1"
            file_progress.listen(lambda p: bar.update(
                task, description=escape(one_line(file_progress.describe(p)))))

        def advance(result: RunResult) -> None:
            # the description column reads markup: a name such as `[/x]` must stay text
            bar.update(task, advance=1, description=escape(one_line(result.run_name)))
            done[0] += 1
            if not console.is_terminal:  # CI logs and nohup: a line per run as it ends,
                # on stdout with the results (stderr keeps warnings and errors only)
                print(f"{done[0]}/{expected[0]} {result.status} {one_line(result.run_name)} "
                      f"in {result.seconds:.1f} s", flush=True)
            # one line each, never wrapped: users grep these and tests count them
            for line in result.warnings:
                console.print(f"warning: {one_line(line)}", markup=False, highlight=False,
                              soft_wrap=True)
            if result.error:
                console.print(f"error: {one_line(result.error)}", markup=False,
                              highlight=False, soft_wrap=True)

        def start(count: int) -> None:
            expected[0] = count
            bar.update(task, total=count)

        advance.start = start  # type: ignore[attr-defined]
        try:
            yield advance
        finally:
            file_progress.listen(None)


def _cell(name: str) -> Any:
    """A run name for a rich table: escaped like messages, and never read as markup
    (a folder may be named `[/bold]`, which rich would reject or obey)."""
    from rich.text import Text

    return Text(one_line(name))


def summary(results: list[RunResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="etl ingest")
    noted = any(r.notes for r in results)
    columns = ("run", "status", "events", "kernels", "ncu kernels", "anomalies", "seconds",
               *(("notes",) if noted else ()))
    for column in columns:
        table.add_column(column, justify="left" if column in ("run", "status", "notes")
                         else "right")
    for r in results:
        table.add_row(_cell(r.run_name), r.status, f"{r.events:,}", f"{r.kernels:,}",
                      f"{r.ncu_kernels:,}", f"{r.anomalies:,}", f"{r.seconds:.2f}",
                      *((one_line("; ".join(r.notes)),) if noted else ()))
    total = sum(r.seconds for r in results)
    table.add_row(counted(len(results), "run"), _counts(results),
                  f"{sum(r.events for r in results):,}",
                  f"{sum(r.kernels for r in results):,}",
                  f"{sum(r.ncu_kernels for r in results):,}",
                  f"{sum(r.anomalies for r in results):,}", f"{total:.2f}",
                  *(("",) if noted else ()), style="bold")
    console = Console(width=120)
    console.print(table)
    refused = [name for r in results for name in r.refused]
    if refused:  # one line: the warnings above say why each was refused
        console.print(f"{len(refused)} export{'s' if len(refused) > 1 else ''} refused: "
                      f"{', '.join(one_line(n) for n in refused)} (their runs were ingested "
                      "without them; --strict refuses such runs)", markup=False,
                      highlight=False, soft_wrap=True)


def _counts(results: list[RunResult]) -> str:
    statuses = [r.status for r in results]
    return ", ".join(f"{statuses.count(s)} {s}" for s in ("ingested", "unchanged", "refused")
                     if statuses.count(s))


def _plain(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def print_rows(columns: list[str], rows: list[tuple[Any, ...]], fmt: str,
               limit: int | None = None) -> None:
    """Rows as json, csv (every row, every digit), a table or lines (the first `limit`
    rows)."""
    if fmt == "json":
        json.dump([dict(zip(columns, map(_plain, row))) for row in rows], sys.stdout)
        sys.stdout.write("\n")
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else _plain(v) for v in row] for row in rows])
    elif fmt == "line":
        from etl.cli.plain_table import render_lines

        shown = rows if limit is None else rows[:limit]
        sys.stdout.write("\n".join(render_lines(columns, shown, len(rows))) + "\n")
    else:
        _table_rows(columns, rows, limit)


def _table_rows(columns: list[str], rows: list[tuple[Any, ...]], limit: int | None) -> None:
    import shutil

    from etl.cli.plain_table import render

    width = shutil.get_terminal_size((120, 24)).columns
    shown = rows if limit is None else rows[:limit]
    sys.stdout.write("\n".join(render(columns, shown, len(rows), width)) + "\n")
