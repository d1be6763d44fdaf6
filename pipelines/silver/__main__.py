"""``python -m pipelines.silver --config FILE``."""

import sys

from pipelines.silver.job import main

sys.exit(main())
