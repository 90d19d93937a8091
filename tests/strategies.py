"""The suite's instance strategies live in :mod:`spectheory.testing.checks.strategies`."""

from spectheory.testing.checks.strategies import KINDS, instances, make_instance  # noqa: F401
