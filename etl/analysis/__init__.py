"""Analyses at query time on the replay of etl/replay/: what a change would buy (whatif.py)."""
