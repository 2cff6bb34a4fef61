"""Measuring: the grid walk, the adaptive walk and the open-loop rate walk over a model's points, one point
measured with its provenance, preflight checks, and a run measured in parts with their merge.

May import: the folders before it, up to pipeline.diff."""
