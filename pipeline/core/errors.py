"""The one exception type for errors a user can cause (bad config, unknown run, corrupt file).

The CLI prints its message on one line without a traceback and exits with status 2.
Bugs raise ordinary exceptions.
"""


class BatchmarkError(Exception):
    """A user-caused error; the message names the file, field or value at fault."""
