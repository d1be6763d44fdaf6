"""The lakehouse's shared concerns, below every job: where things live and how Delta is written.

- :mod:`lakehouse.layout`: every path of the lakehouse (tables, checkpoints, app ids, quality
  results and Data Docs). No other module spells one; a URI scheme (``s3a://``) plugs in here.
- :mod:`lakehouse.delta`: idempotent appends, conflict retries, listing and reading tables.
- :mod:`lakehouse.streaming`: app ids, triggers, awaiting and stopping queries; small text files.
- :mod:`lakehouse.store`: the lakehouse's files for readers without a JVM (pyarrow file system
  plus delta-rs ``storage_options``; local folders or ``s3a://``).
- :mod:`lakehouse.lease`: the writer lease that keeps one driver writing a table group of an
  object-store lakehouse.
- :mod:`lakehouse.materialized`: a micro-batch's frames computed once and read back without
  recomputing.
- :mod:`lakehouse.sql_text`: column expressions as Spark SQL text (one parse, not a Py4J call
  per node).

It sits below ``quality`` and ``pipelines`` (both write Delta tables of the lakehouse), and
imports neither of them, nor Airflow.
"""
