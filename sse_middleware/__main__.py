"""``python -m sse_middleware check URL``: is this stream really streaming? See :mod:`._check`."""

import sys

from ._check.cli import main

if __name__ == "__main__":
    sys.exit(main())
