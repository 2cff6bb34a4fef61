"""Summaries + cards + hardware → what a run means: ceilings, roofline, MBU/MFU, the knee, regimes, open-loop
saturation, KV capacity, the quality verdict, and the stage runners that write and read a run's derived files.

May import: the folders before it (core, machine, cards, config, engines, store, metrics)."""
