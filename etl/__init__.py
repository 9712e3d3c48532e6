"""GPU utilization warehouse: profiler outputs → Parquet → DuckDB views."""

__version__ = "0.1.0"
