"""What protolake's DAG files share, one module per job:

- :mod:`.environment`: the worker's settings (``PROTOLAKE_CONFIG``, integers from the
  environment, which spark-submit, the ``protolake_registry`` connection), the configuration
  as the jobs see it, and the lakehouse's :class:`lakehouse.layout.Layout` on this machine;
- :mod:`.spark_submit`: :class:`~.spark_submit.ProtolakeSparkSubmitOperator`, the operator of
  every Spark task;
- :mod:`.tables`: Delta versions and row counts of the lakehouse's tables, read with
  ``deltalake`` (no Spark, no JVM; a local folder or ``s3a://``, through the
  :class:`lakehouse.store.Store` of :func:`.environment.open_lakehouse`), and the ingest
  summary;
- :mod:`.progress`: what the streaming checkpoints say (last batch, its age, the lag) and the
  health verdict of a continuous job;
- :mod:`.supervision`: the continuous streams' processes (start, stop, pid files, logs with
  secrets redacted) and the streaming DAG's check.

Contract: the dags folder is on ``sys.path`` (Airflow puts it there), so the package is
``protolake_support``; ``.airflowignore`` keeps Airflow from parsing its modules as DAG files.
Importing ``environment`` or ``spark_submit`` (what DAG files import at parse time) loads only
the standard library and Airflow; ``pipelines``, ``lakehouse``, ``deltalake`` and
``confluent_kafka`` are imported inside the functions that run in a task. Secrets are never
written to a DAG file or a log.
"""
