"""What a measured run would take on another GPU (issue #31): the catalog's GPUs, a time
model fitted on public cross-GPU measurements (model.py, coefficients.toml), a ladder of
methods per GPU activity (predict.py) and the run's graph replayed with the predicted
durations (run.py); the interval from the backtest's errors (intervals.py)."""
