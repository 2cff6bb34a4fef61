"""batchmark's Python API: what another program imports to read batchmark's results (docs/python-api.md).

``from pipeline.api import load_run``: a stored run as a typed, validated view (:class:`pipeline.api.run.Run`).
Imports every earlier folder's public readers; nothing of the package imports it but the CLI's layer.
"""

from pipeline.api.run import Run, load_run

__all__ = ["Run", "load_run"]
