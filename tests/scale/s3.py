"""S3, as far as it can run here: moto's server speaking S3's wire protocol on loopback, for the
inputs `lithify convert` reads by ``s3://`` URL (docs/scale.md). Its credentials are made up
(moto takes any); the endpoint goes in each URL (``?endpoint_override=``), as a user points
lithify at an S3-compatible store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Given to this process and to the test cluster's nodes (tests/scale/cluster.py), so that every
# reader of s3:// finds credentials in its environment and none asks an instance for a role.
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "lithify-test",
    "AWS_SECRET_ACCESS_KEY": "lithify-test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class FakeS3:
    endpoint: str  # http://127.0.0.1:PORT
    client: Any  # boto3's S3 client on it

    def url(self, bucket: str, key: str, credentials: str = "") -> str:
        """``s3://[credentials@]bucket/key`` on this endpoint."""
        at = f"{credentials}@" if credentials else ""
        return f"s3://{at}{bucket}/{key}?endpoint_override={self.endpoint}&region=us-east-1"

    def upload(self, folder: Path, bucket: str, prefix: str) -> None:
        """Every file under ``folder`` as ``prefix/`` + its path in the folder."""
        self.client.create_bucket(Bucket=bucket)
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(folder).as_posix()}"
                self.client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


@contextmanager
def fake_s3() -> Iterator[FakeS3]:
    """moto's S3 server on a free loopback port, with ``FAKE_AWS`` in this process's
    environment; stopped, and the environment restored, on leaving."""
    import boto3
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in FAKE_AWS}
    os.environ.update(FAKE_AWS)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        yield FakeS3(endpoint, boto3.client("s3", endpoint_url=endpoint))
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
