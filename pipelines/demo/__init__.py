"""The demo: a shop's Protobuf stream on Kafka, every pipeline stage run on it, and a report.

``python -m pipelines.demo`` / ``protolake demo`` (:mod:`pipelines.demo.main`). The modules,
from the stream to the report:

- :mod:`~pipelines.demo.stream`: what the stream is (topics, poison kinds, quality rules it
  breaks, the record and summary types);
- :mod:`~pipelines.demo.schemas`: the demo's .proto files (``proto/``), compiled per version;
- :mod:`~pipelines.demo.shop`: the shop's messages; :mod:`~pipelines.demo.generate`: the
  records, well-formed and poison, serialized against a schema registry;
- :mod:`~pipelines.demo.produce`: the stack probe, topic creation and producing;
- :mod:`~pipelines.demo.config`: ``demo.toml`` and the demo's overrides;
- :mod:`~pipelines.demo.expected`: what the lakehouse must hold for the streams produced;
- :mod:`~pipelines.demo.collect` and :mod:`~pipelines.demo.report`: what the lakehouse holds,
  the checks, and the printed report.
"""
