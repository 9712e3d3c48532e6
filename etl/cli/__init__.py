"""The command line: click commands over the library; the only package that prints.

`etl` (the installed entry point) and `python -m etl.cli` both run `main`. commands.py
holds the group and the warehouse commands, analyses.py the replay's (whatif),
forecast.py the forecast's (forecast, gpus).
"""
from etl.cli import analyses, forecast  # noqa: F401  (register their commands on main)
from etl.cli.commands import accept_debug_after_commands, main

accept_debug_after_commands()

__all__ = ["main"]
