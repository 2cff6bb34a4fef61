"""What a sweep will cost and predict before it runs (the simulated server on the sweep's own requests), and the
budget that chooses what to measure.

May import: the folders before it, up to pipeline.sweep."""
