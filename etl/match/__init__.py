"""Trace ↔ Nsight Compute kernel matching: names.py (name keys), align.py (the matcher)."""
