"""Run against run: the statistics (Welch's t-test, Benjamini–Hochberg), the metrics a diff compares, which
points pair, whether two runs are comparable, withheld calls, the diff itself, its --fail-above gate and its report.

May import: the folders before it, up to pipeline.predict."""
