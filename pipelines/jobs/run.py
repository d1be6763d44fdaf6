"""spark-submit entry point: ``spark-submit ... pipelines/jobs/run.py <subcommand> --config FILE``.

The arguments are those of the ``protolake`` command (:mod:`pipelines.cli`), so a job submitted
to a cluster runs exactly the code path of a local ``protolake <subcommand>``. Build the whole
command line with :func:`pipelines.jobs.submit_command`. A failure propagates with its whole
trace (``main``'s ``full_traces``), for the scheduler's task log.
"""

from __future__ import annotations

import sys

from pipelines.cli import main

if __name__ == "__main__":
    sys.exit(main(full_traces=True))
