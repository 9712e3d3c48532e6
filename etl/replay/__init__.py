"""Replay: each run's dependency graph, replayed with given durations, and its critical path.

graph.py builds the graph from what the trace records (host calls in thread order, launch
→ GPU activity, stream order, synchronizations, collectives across ranks); engine.py
computes every start and end for a set of durations; critical_path.py walks back from each
iteration's end along what bound each node; stage.py writes the measured critical path at
ingest. The what-if and forecast analyses (etl/analysis/) replay the same graph with other
durations.
"""
