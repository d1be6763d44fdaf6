"""How a silver micro-batch's expressions are evaluated: interpreted for a small batch,
generated Java code for a large one.

Spark compiles a projection that whole-stage code generation does not cover to Java code, and
it does so in every task: it caches the compiled class, not the generation of its source.
Silver's projections (decoded messages as nested structs, frame heads as literals, the
quarantine's union of reasons) are of that kind, and for a small batch generating their code
costs more than evaluating them. Measured on 2 cores: in ``bench/freshness_bench.py`` at
1,000 records/s (batches of a hundred to 36,000 records), a third of the silver JVM's CPU
samples (JFR) were formatting generated source (``CodeFormatter``'s regular expressions) in
tasks. Four silver queries of about 500 records each, in a fresh JVM: 75 s of wall time and
122 s of JVM CPU with generated code, 55 s and 81 s interpreted; the same again in the warm
JVM: 58 s and 80 s against 45 s and 60 s. A large batch is the other way round. The
decode alone (``bench/silver_bench.py``, records/s, generated against interpreted): 33k and
27k for 30,000 records, 72k and 77k for 100,000 (within the runs' noise), 139k and 105k for
300,000; a whole small batch (its checks, quarantine and appends add projections per record)
is where interpreted evaluation wins, and it is what a stream runs.

So each batch chooses by its record count (known after its first step, the frame heads'
counts): below :data:`INTERPRET_BELOW_RECORDS` interpreted, else generated code. The choice
is ``spark.sql.codegen.factoryMode`` (a setting Spark marks internal; its test suites switch
it, as protolake's do) of the query's own session: the jobs that run on the batch's
DataFrames read it (decode, checks, quarantine, appends); what the job does on its own
session (creating and registering tables) keeps the launch setting. A job session that sets
``spark.sql.codegen.factoryMode`` itself (``[spark.conf]``, ``spark-submit --conf``,
``spark-defaults.conf``, ``spark.conf.set``) keeps that setting, and a batch read through the
job's own session (replay's) is left as it is.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

FACTORY_MODE = "spark.sql.codegen.factoryMode"
INTERPRETED = "NO_CODEGEN"
GENERATED = "FALLBACK"  # Spark's default: generated code, interpreted when it fails to compile
#: a batch of fewer records evaluates its expressions interpreted
INTERPRET_BELOW_RECORDS = 50_000


class ExpressionEvaluation:
    """Chooses, batch by batch, between interpreted and generated-code expressions for one
    silver query (see the module docstring).

    Args:
        main: the job's session, never changed.
        fixed: the job's session chose (:meth:`choose` changes nothing).
        below: batches of fewer records are interpreted.
    """

    def __init__(
        self, main: SparkSession, fixed: bool, below: int = INTERPRET_BELOW_RECORDS
    ) -> None:
        self.main = main
        self.fixed = fixed
        self.below = below

    @classmethod
    def for_session(cls, spark: SparkSession) -> ExpressionEvaluation:
        """Fixed when ``spark`` sets ``spark.sql.codegen.factoryMode`` (at launch or since)."""
        chosen = spark.sparkContext.getConf().contains(FACTORY_MODE)
        return cls(spark, fixed=chosen or spark.conf.get(FACTORY_MODE, None) is not None)

    def mode_for(self, records: int) -> str:
        """The factory mode for a batch of ``records`` records."""
        return INTERPRETED if records < self.below else GENERATED

    def choose(self, session: SparkSession, records: int) -> None:
        """Set the mode for a batch of ``records`` records on ``session``, the query's own
        (the micro-batch DataFrame's ``sparkSession``); the job's session is left alone."""
        if self.fixed or session._jsparkSession.equals(self.main._jsparkSession):
            return
        mode = self.mode_for(records)
        if session.conf.get(FACTORY_MODE, None) != mode:
            session.conf.set(FACTORY_MODE, mode)
