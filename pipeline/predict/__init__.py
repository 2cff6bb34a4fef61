"""Predictions from measurements: the calibrated per-step model fitted to measured points, the simulated
server driven by it, and the adaptive sweep's choice of what to measure next (pure).

May import: the folders before it, up to pipeline.analysis."""
