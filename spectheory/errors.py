"""Errors that the command line reports as one line with exit code 2 (never a traceback).

Every error the toolkit raises on bad input is a :class:`SpectheoryError`, a subclass of
:class:`ValueError`, so Python callers can catch one type; its message is the same one line the
command line prints after ``spectheory: error:``.
"""


class SpectheoryError(ValueError):
    """Base class: bad input or a request the toolkit refuses, with a message naming the problem."""


class InstanceError(SpectheoryError):
    """An instance or model is malformed (missing prefix, bad row, bad size, unreadable JSON)."""


class SizeLimitError(SpectheoryError):
    """An enumeration or LP would exceed the configured size limit."""


class OptionError(SpectheoryError):
    """An option, parameter or environment variable is outside its accepted range."""


class TimeLimitError(SpectheoryError):
    """A computation ran past its time limit (``--time-limit``) and was stopped; no result."""
