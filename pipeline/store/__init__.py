"""The run folder and its files: the store that owns a run's life (claim, write points, publish in one rename),
one pydantic schema per stored file, point files (JSON header, Parquet requests), run ids and the run lock, and
`batchmark upgrade`'s format rewrite.

May import: pipeline.core."""
