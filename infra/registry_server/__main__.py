"""``python -m infra.registry_server --port 8081 --data run/registry.json`` (see `server.main`)."""

import sys

from .server import main

sys.exit(main())
