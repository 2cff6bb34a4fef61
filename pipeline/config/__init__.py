"""The sweep configuration: its pydantic models, loading and validation, each engine's options, and the
resources a measuring job asks a cluster for.

May import: pipeline.core, pipeline.machine, pipeline.cards."""
