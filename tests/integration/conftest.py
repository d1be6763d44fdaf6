"""Fixtures shared by the integration tests: the real Apicurio Registry of infra/stack.sh.

Apicurio Registry (io.apicurio:apicurio-registry-app from Maven Central, in-memory storage)
serves Confluent's Schema Registry REST API under /apis/ccompat/v7. `make test` starts it
(`infra/stack.sh up apicurio`); when it does not answer, the tests that use it fail, never
skip. It keeps its schemas in memory for the life of the process, so every test registers
under its own names.
"""

from __future__ import annotations

import os

import pytest
import requests

APICURIO_URL = (
    f"http://127.0.0.1:{os.environ.get('PROTOLAKE_APICURIO_PORT', '8085')}/apis/ccompat/v7"
)


@pytest.fixture(scope="session")
def apicurio_url() -> str:
    """The Confluent-compatible base URL of the running Apicurio Registry."""
    try:
        answer = requests.get(APICURIO_URL + "/subjects", timeout=10)
        answer.raise_for_status()
        assert isinstance(answer.json(), list)
    except (requests.RequestException, ValueError, AssertionError) as exc:
        pytest.fail(
            f"Apicurio Registry at {APICURIO_URL} does not answer ({exc}); "
            "run `infra/stack.sh up apicurio`"
        )
    return APICURIO_URL
