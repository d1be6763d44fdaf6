"""The names of the loggers the command line configures apart from the others (``cli``), one
spelling each for the modules that log to them and for the command line."""

#: the metrics' JSON lines (``pipelines.metrics``): bare JSON on stderr with ``--json``
METRICS_LOGGER = "pipelines.metrics"
#: the short lines a command reports its stages and batches with (``pipelines.progress``)
PROGRESS_LOGGER = "pipelines.progress"
#: the Kafka clients' own log lines (``settings.clients.client_logging``): shown with ``-v``
KAFKA_CLIENT_LOGGER = "pipelines.kafka_client"
