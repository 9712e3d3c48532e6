"""Definitions every stage reads: errors, table schemas, kernel names, the GPU catalog,
the SQL of the views as data, and where the data files lie. Imports no other stage."""

VERSION = "0.1.0"  # the package's version (pyproject.toml says the same)
