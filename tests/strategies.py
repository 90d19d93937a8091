"""The suite's instance strategies live in :mod:`spectheory.testing.strategies`."""

from spectheory.testing.strategies import KINDS, instances, make_instance  # noqa: F401
