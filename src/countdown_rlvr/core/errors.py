"""The one user-facing error type (no imports: config, io and every stage can raise it)."""


class StageError(SystemExit):
    """A user-facing error: stops the stage with a message that names the fix."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"[{stage}] error: {message}")
