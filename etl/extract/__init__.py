"""Extractors: one module per input format, and the registry that recognises files."""
