"""What people read: the HTML report, run comparisons, traces exported for Perfetto."""
