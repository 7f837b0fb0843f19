"""The errors every layer may raise about what a user or a caller gave it.

This module sits below everything else so that the store, the API, ingest and the command line
can all raise and catch the same exceptions without importing each other. The command line maps
them to one printed line and an exit code; the API maps them to problem responses.
"""


class UserError(Exception):
    """A mistake in what the user gave us: printed as one line, exit code 2 by default."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class LimitError(UserError):
    """What was sent is larger than a limit allows (a body, a line count, a list): the API's 413."""
