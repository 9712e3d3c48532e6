"""Where the data the code reads lives: the `sql/` and `schemas/` folders.

The repository keeps them at its top level, beside `etl/`, where they are reviewed as data.
A wheel cannot install top-level folders of its own into site-packages, so it carries them
inside the package, as `etl/sql/` and `etl/schemas/` (the mapping is in setup.py). A source
checkout and an editable install have no `etl/sql/`, so the checkout's folder is used; an
installed wheel has it. Paths, not importlib.resources: the views are found by globbing
(`sql/views/**/*.sql`), and a wheel is installed unpacked.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # etl/


def data_dir(name: str) -> Path:
    """`name` (`sql` or `schemas`) inside the installed package, else in the checkout.

    When neither exists, the packaged path: the error that follows names the place a wheel
    should have filled, not a folder that site-packages never has.
    """
    packaged, checkout = PACKAGE_DIR / name, PACKAGE_DIR.parent / name
    return checkout if not packaged.is_dir() and checkout.is_dir() else packaged
