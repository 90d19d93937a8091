"""``python -m spectheory``: the same command line as ``spectheory``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
