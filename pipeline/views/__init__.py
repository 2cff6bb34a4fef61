"""Views of stored runs for the terminal: `batchmark show` (its JSON contract and text table) and
`batchmark predict`.

May import: the folders before it, up to pipeline.importers."""
