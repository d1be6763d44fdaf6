"""`python -m codec`: see `codec.cli` for the command-line contract."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
