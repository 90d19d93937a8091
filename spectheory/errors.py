"""Errors that the command line reports as one line with exit code 2 (never a traceback)."""


class SpectheoryError(Exception):
    """Base class: bad input or a request the toolkit refuses, with a message naming the problem."""


class InstanceError(SpectheoryError):
    """An instance or model is malformed (missing prefix, bad row, bad size, unreadable JSON)."""


class SizeLimitError(SpectheoryError):
    """An enumeration or LP would exceed the configured size limit."""
