"""``python -m pipelines.silver --config FILE``."""

import sys

from pipelines.silver.cli import main

sys.exit(main())
