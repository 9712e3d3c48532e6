"""The warehouse on disk: immutable publish folders of Parquet, compaction, rm and mv."""
