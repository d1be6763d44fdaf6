"""``python -m pipelines.demo [options]``: the same as ``protolake demo``."""

import sys

from pipelines.demo.main import main

sys.exit(main())
