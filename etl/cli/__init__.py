"""The command line: click commands over the library; the only package that prints.

`etl` (the installed entry point) and `python -m etl.cli` both run `main`.
"""
from etl.cli.commands import main

__all__ = ["main"]
