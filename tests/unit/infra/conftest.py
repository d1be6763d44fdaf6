"""``infra/`` is not a package (its scripts run standalone): import its modules from the folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "infra"))
