"""The machine that measures: hardware profiles and the probe, outside load while a point runs, the server's own
virtual environment and the local model folders a server loads.

May import: pipeline.core."""
