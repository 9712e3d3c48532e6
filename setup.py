"""Only what pyproject.toml cannot say: the wheel's place for sql/ and schemas/.

The repository keeps `sql/` and `schemas/` at its top level; the wheel carries them inside
the package as `etl/sql/` and `etl/schemas/` (etl/core/resources.py finds either place). That
needs a package_dir mapping next to package discovery, and pyproject.toml's
[tool.setuptools] takes a discovered list or a mapped list, not both.
"""
from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["etl", "etl.*"]), "etl.sql", "etl.schemas"],
    package_dir={"etl.sql": "sql", "etl.schemas": "schemas"},
)
