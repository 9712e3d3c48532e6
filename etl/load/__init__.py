"""Load: one run folder → its tables staged as Parquet, published into the warehouse."""
