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


class UserCodeError(SpectheoryError):
    """A user's function (verifier, sampler, draft step, module) raised, exited or returned
    something unusable; the message names the function and what it did."""


def _describe(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}:{name}" if module and module not in ("builtins", "__main__") else str(name)


def call_user(fn, *args, what: str | None = None, **kwargs):
    """Call a user's ``fn(*args, **kwargs)``; anything it raises (any exception, and
    ``SystemExit`` with any code, so that user code can never end a check with exit 0) becomes a
    :class:`UserCodeError` naming the function (``what``, else ``module:name``) and what it did.
    ``KeyboardInterrupt`` passes through, as does a :class:`SpectheoryError` (already one line).
    The original exception is chained (``--debug`` prints it)."""
    try:
        return fn(*args, **kwargs)
    except SpectheoryError:
        raise
    except SystemExit as exc:
        label = what or _describe(fn)
        raise UserCodeError(f"{label} called sys.exit({exc.code!r}); user code must return, "
                            "not exit") from exc
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - user code may raise anything
        label = what or _describe(fn)
        detail = " ".join(str(exc).split())
        raise UserCodeError(f"{label} raised {type(exc).__name__}"
                            + (f": {detail}" if detail else "")) from exc
