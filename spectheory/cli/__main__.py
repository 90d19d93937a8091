"""``python -m spectheory.cli``: the same command line as ``spectheory``."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
