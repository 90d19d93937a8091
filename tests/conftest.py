import os
import sys

from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))

# Deterministic property tests in CI: the same examples on every run.
settings.register_profile("spectheory", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("spectheory")
