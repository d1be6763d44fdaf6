"""How a silver micro-batch is planned and its expressions evaluated: a small batch
interpreted and without adaptive execution, a large one with generated code and adaptive
execution.

Expressions. Spark compiles a projection that whole-stage code generation does not cover to
Java code, and it does so in every task: it caches the compiled class, not the generation of
its source. Silver's projections (decoded messages as nested structs, frame heads as literals,
the quarantine's union of reasons) are of that kind, and for a small batch generating their
code costs more than evaluating them. Measured on 2 cores: in ``bench/freshness_bench.py`` at
1,000 records/s (batches of a hundred to 36,000 records), a third of the silver JVM's CPU
samples (JFR) were formatting generated source (``CodeFormatter``'s regular expressions) in
tasks. Four silver queries of about 500 records each, in a fresh JVM: 75 s of wall time and
122 s of JVM CPU with generated code, 55 s and 81 s interpreted; the same again in the warm
JVM: 58 s and 80 s against 45 s and 60 s. A large batch is the other way round. The
decode alone (``bench/silver_bench.py``, records/s, generated against interpreted): 33k and
27k for 30,000 records, 72k and 77k for 100,000 (within the runs' noise), 139k and 105k for
300,000; a whole small batch (its checks, quarantine and appends add projections per record)
is where interpreted evaluation wins, and it is what a stream runs.

Adaptive execution. It re-plans a query after each shuffle and runs each shuffle's stage as a
Spark job of its own, to size the next stage by what the shuffle wrote: for a few thousand
records there is nothing to size, and a silver batch has several shuffles (the frame heads'
and the quarantine's counts, each table's checks). So a small batch runs without it, each
shuffle in one partition per :data:`RECORDS_PER_SHUFFLE_PARTITION` records, and no more than
the application has cores (its default parallelism) or the launch setting allows: a few
partitions, as adaptive execution would have coalesced them to, however large the cluster.
``bench/small_batch_bench.py`` measures it (figures in ``docs/streaming.md``): on 2 cores,
about a quarter to a half fewer Spark jobs, and the same CPU and wall time within the runs'
noise. The jobs saved are stage submissions and listener events, which cost more where the
executors are remote and in a stream's event log than on one machine.

So each batch chooses by its record count (known after its first step, the frame heads'
counts): below :data:`INTERPRET_BELOW_RECORDS` the small-batch settings, else the launch
settings. They are set on the query's own session (the micro-batch DataFrame's): the jobs that
run on the batch's DataFrames read them (decode, checks, quarantine, appends); what the job does
on its own session (creating and registering tables) keeps the launch settings, and a batch
read through the job's own session (replay's) is left as it is. A job session that sets a
setting itself (``[spark.conf]``, ``spark-submit --conf``, ``spark-defaults.conf``,
``spark.conf.set``) keeps it: ``spark.sql.codegen.factoryMode`` (a setting Spark marks
internal; its test suites switch it, as protolake's do) for the expressions,
``spark.sql.adaptive.enabled`` for adaptive execution and the shuffle partitions. Each batch
sets all of them again once its count is known, so its later steps never depend on what the
batch before it chose (nor on the shuffle partitions a restarted stream takes back from its
checkpoint); its first step runs with the settings the query's session has (the previous
batch's), and a large batch goes back to the job session's values.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from pipelines.spark import configured, set_for_query

FACTORY_MODE = "spark.sql.codegen.factoryMode"
INTERPRETED = "NO_CODEGEN"
GENERATED = "FALLBACK"  # Spark's default: generated code, interpreted when it fails to compile
ADAPTIVE = "spark.sql.adaptive.enabled"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: a batch of fewer records evaluates its expressions interpreted, without adaptive execution
INTERPRET_BELOW_RECORDS = 50_000
#: a small batch's shuffles get a partition per this many records (at least one)
RECORDS_PER_SHUFFLE_PARTITION = 10_000


class ExpressionEvaluation:
    """Chooses, batch by batch, the settings of a small or a large batch for one silver
    query: interpreted or generated-code expressions, adaptive execution off or as launched
    (see the module docstring).

    Args:
        main: the job's session, never changed.
        fixed: the job's session chose the expressions' mode (:meth:`choose` leaves it).
        below: batches of fewer records are small.
        adaptive_fixed: the job's session chose adaptive execution (:meth:`choose` leaves
            it and the shuffle partitions).
    """

    def __init__(
        self,
        main: SparkSession,
        fixed: bool,
        below: int = INTERPRET_BELOW_RECORDS,
        *,
        adaptive_fixed: bool = True,
    ) -> None:
        self.main = main
        self.fixed = fixed
        self.below = below
        self.adaptive_fixed = adaptive_fixed
        # the launch settings a large batch goes back to
        self._launch = {key: str(main.conf.get(key)) for key in (ADAPTIVE, SHUFFLE_PARTITIONS)}

    @classmethod
    def for_session(cls, spark: SparkSession) -> ExpressionEvaluation:
        """Each setting fixed when ``spark`` sets it (at launch or since)."""
        return cls(
            spark,
            fixed=configured(spark, FACTORY_MODE),
            adaptive_fixed=configured(spark, ADAPTIVE),
        )

    def mode_for(self, records: int) -> str:
        """The factory mode for a batch of ``records`` records."""
        return INTERPRETED if records < self.below else GENERATED

    def settings_for(self, records: int) -> dict[str, str]:
        """The settings :meth:`choose` gives a batch of ``records`` records."""
        chosen = {} if self.fixed else {FACTORY_MODE: self.mode_for(records)}
        if self.adaptive_fixed:
            return chosen
        if records >= self.below:
            return {**chosen, **self._launch}
        partitions = min(self._launch_partitions(), -(-records // RECORDS_PER_SHUFFLE_PARTITION))
        return {**chosen, ADAPTIVE: "false", SHUFFLE_PARTITIONS: str(max(1, partitions))}

    def _launch_partitions(self) -> int:
        """The cores, or fewer when the launch setting says so (a number; others ignored)."""
        cores = max(1, self.main.sparkContext.defaultParallelism)
        try:
            return min(cores, int(self._launch[SHUFFLE_PARTITIONS]))
        except ValueError:
            return cores

    def choose(self, session: SparkSession, records: int) -> None:
        """Set the settings for a batch of ``records`` records on ``session``, the query's own
        (the micro-batch DataFrame's ``sparkSession``); the job's session is left alone."""
        set_for_query(self.main, session, self.settings_for(records))
