"""Trace ↔ Nsight Compute kernel matching.

align.py is the matcher (on the name keys of etl/core/kernel_names.py), placement.py moves
a match among identical iterations, stage.py runs both over one run's tables.
"""
