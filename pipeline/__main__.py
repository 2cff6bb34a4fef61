"""``python -m pipeline`` runs the ``batchmark`` command."""

import sys

from pipeline.cli import main

sys.exit(main())
