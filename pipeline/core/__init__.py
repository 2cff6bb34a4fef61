"""Foundation shared by every stage: errors, project paths, request records and point summaries (the raw data
and its summary types), their numpy arrays, atomic writes and strict reads, scrubbing of secrets and machine paths,
the progress display, text tables and the words readers see.

May import: nothing of batchmark outside this folder."""
