"""The stack's S3-compatible store (``infra/stack.sh up s3``, SeaweedFS) for tests.

Its endpoint and generated credential are read from ``<run>/s3.env`` (``PROTOLAKE_RUN_DIR``,
default ``./run``). A store that does not answer fails the tests that need it (CI starts it;
run ``infra/stack.sh up s3``): they never skip. Buckets are made with pyarrow's S3 client, an
implementation independent of protolake's (S3A, delta-rs).
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.stack import run_dir

#: an ``[s3]`` configuration section whose settings come from the store's environment
#: (:attr:`S3Store.environment`) through ``${env:...}``, as a user's file names them
S3_FROM_ENV: dict[str, Any] = {
    "endpoint": "${env:AWS_ENDPOINT_URL}",
    "region": "${env:AWS_REGION}",
    "path_style_access": True,
    "access_key_id": "${env:AWS_ACCESS_KEY_ID}",
    "secret_access_key": "${env:AWS_SECRET_ACCESS_KEY}",
}


@dataclass(frozen=True)
class S3Store:
    endpoint: str
    access_key_id: str
    secret_access_key: str
    region: str

    @property
    def environment(self) -> dict[str, str]:
        """The AWS variables of run/s3.env."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
        }

    def section(self, **overrides: Any) -> dict[str, Any]:
        """An ``[s3]`` configuration section for this store."""
        return {
            "endpoint": self.endpoint,
            "region": self.region,
            "path_style_access": True,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            **overrides,
        }

    def filesystem(self) -> Any:
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=self.access_key_id,
            secret_key=self.secret_access_key,
            endpoint_override=self.endpoint,
            region=self.region,
            scheme="http",
            allow_bucket_creation=True,
            allow_bucket_deletion=True,
        )

    def create_bucket(self, prefix: str = "protolake-it") -> str:
        """A new, empty bucket with a unique name."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.filesystem().create_dir(name)
        return name

    def delete_bucket(self, name: str) -> None:
        """Delete a bucket and everything in it (SeaweedFS then frees its volumes: a store
        keeps at most ``-volume.max`` of them, 7 per bucket that holds objects)."""
        self.filesystem().delete_dir(name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under ``bucket/prefix`` (recursive)."""
        from pyarrow import fs

        infos = self.filesystem().get_file_info(
            fs.FileSelector(f"{bucket}/{prefix}".rstrip("/"), recursive=True, allow_not_found=True)
        )
        return sorted(i.path for i in infos if i.type == fs.FileType.File)


def load_store() -> S3Store:
    """The stack's store from ``<run>/s3.env``; fails the test when it is not up."""
    env_file = run_dir() / "s3.env"
    if not env_file.is_file():
        pytest.fail(f"{env_file} missing: run `infra/stack.sh up s3`")
    values = dict(
        line.split("=", 1)
        for line in env_file.read_text(encoding="utf-8").splitlines()
        if "=" in line and not line.startswith("#")
    )
    store = S3Store(
        values["AWS_ENDPOINT_URL"],
        values["AWS_ACCESS_KEY_ID"],
        values["AWS_SECRET_ACCESS_KEY"],
        values["AWS_REGION"],
    )
    try:
        urllib.request.urlopen(store.endpoint + "/", timeout=5).close()
    except urllib.error.HTTPError:
        pass  # an S3 error answer (anonymous request): the store is up
    except OSError as exc:
        pytest.fail(
            f"the S3 store at {store.endpoint} does not answer ({exc}); run `infra/stack.sh up s3`"
        )
    return store
