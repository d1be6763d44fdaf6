"""Great Expectations is loaded only by what validates: reading results needs none of it."""

from __future__ import annotations

import subprocess
import sys


def test_results_module_does_not_import_great_expectations():
    """Reading quality results, and silver's tables, load no Great Expectations (seconds)."""
    code = (
        "import sys, quality.results, pipelines.silver.tables;"
        "print(any(m.startswith('great_expectations') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
