"""The ``claimtrail`` command line (see ``main``)."""


class UserError(Exception):
    """A mistake in what the user gave us: printed as one line, exit code 2 by default."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
