"""The engine's exceptions. The gateway maps them; a client never sees an EngineError."""


class EngineError(Exception):
    """The model could not decide (timeout, error, overload): decide() falls back to the rules."""


class BundleError(EngineError):
    """A model bundle is missing, incomplete or corrupt."""


class Overloaded(EngineError):
    """The model's queue is full."""
