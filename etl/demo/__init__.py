"""SYNTHETIC demo runs for `etl demo`, one module per format."""
