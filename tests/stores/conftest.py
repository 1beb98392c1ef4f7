"""Fixtures the S3 store tests share."""
from __future__ import annotations

import pytest

from tests.stores.faulty_s3 import FaultyS3


@pytest.fixture
def faulty(moto_server, monkeypatch):
    """The proxy in front of moto; this process's S3 clients (and the CLIs it starts) talk to it."""
    proxy = FaultyS3(moto_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    yield proxy
    proxy.close()
