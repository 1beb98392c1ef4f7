"""S3 backend on boto3, as netcdf-c's ``mode=…,s3`` names it.

Endpoint, region and credentials are found the way AWS tools find them
(``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``~/.aws/config``, ``~/.aws/credentials``),
plus what the URL says: an https host (path or virtual-host style) and a profile
in the fragment (``aws.profile=NAME`` as netcdf-c's tests write it, or nczarr.md's
``awsprofile=NAME``). Every botocore failure is mapped here, once, to a
:class:`StoreError` with one readable line. ``requests`` records each S3
operation sent, so tests can hold the reader to its request budget.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from .. import keys, limits
from ..errors import StoreError
from ..urls import StoreSpec
from .base import Store

MISSING_KEY_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_CLIENTS: dict[tuple[str | None, str | None, str | None, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(endpoint: str | None, profile: str | None, region: str | None) -> Any:
    """One boto3 client per (endpoint, profile, region, AWS_ENDPOINT_URL): making one costs ~0.1 s."""
    import os

    import boto3
    import botocore.config

    cache_key = (endpoint, profile, region, os.environ.get("AWS_ENDPOINT_URL"))
    with _CLIENTS_LOCK:
        if cache_key in _CLIENTS:
            return _CLIENTS[cache_key]
        session = boto3.Session(profile_name=profile, region_name=region)
        config = botocore.config.Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5,
                                        read_timeout=60, max_pool_connections=32,
                                        s3={"addressing_style": "path"})
        kwargs: dict[str, Any] = {"config": config}
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        if session.region_name is None:
            kwargs["region_name"] = "us-east-1"
        client = session.client("s3", **kwargs)
        _CLIENTS[cache_key] = client
        return client


class S3Store(Store):
    kind = "s3"

    def __init__(self, bucket: str, prefix: str, *, mode: str = "r", overwrite: bool = False,
                 endpoint: str | None = None, profile: str | None = None, region: str | None = None) -> None:
        super().__init__()
        if not bucket:
            raise StoreError("S3 URL names no bucket")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.mode = mode
        self.overwrite = overwrite
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._put_keys: list[str] = []
        import botocore.exceptions as bx

        try:
            self.client = _client(endpoint, profile, region)
        except bx.BotoCoreError as exc:  # ProfileNotFound and friends
            raise StoreError(f"s3://{bucket}/{self.prefix}: {exc}") from exc
        self._recorder = self._record
        self.client.meta.events.register("before-parameter-build.s3.*", self._recorder)
        if mode in ("w", "a"):
            self.writable = True
            if mode == "w" and not overwrite and self._dataset_exists():
                raise StoreError(f"{self!r}: a dataset exists there (use --overwrite to replace it)")
            self._existing = set(self._list_prefix("/")) if mode == "w" and overwrite else set()
        else:
            self._existing = set()

    @classmethod
    def from_spec(cls, spec: StoreSpec, mode: str = "r", overwrite: bool = False) -> S3Store:
        bucket, _, prefix = spec.path.partition("/")
        profile = spec.params.get("aws.profile") or spec.params.get("awsprofile")
        region = spec.params.get("aws.region")
        endpoint = spec.endpoint
        if endpoint and endpoint.split("://")[-1].split(":")[0].endswith("amazonaws.com"):
            endpoint = None  # AWS itself: boto3 picks the regional endpoint (or AWS_ENDPOINT_URL)
        return cls(bucket, prefix, mode=mode, overwrite=overwrite, endpoint=endpoint, profile=profile, region=region)

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if params.get("Bucket") != self.bucket or not str(params.get("Key", params.get("Prefix", ""))).startswith(
                self.prefix):
            return
        with self._lock:
            self.requests.append((model.name, str(params.get("Key", params.get("Prefix", "")))))

    def close(self) -> None:
        """Stop recording requests on the shared client."""
        self.client.meta.events.unregister("before-parameter-build.s3.*", self._recorder)

    def _name(self, key: str) -> str:
        rel = key.lstrip("/")
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _key(self, name: str) -> str:
        rel = name[len(self.prefix):] if self.prefix else name
        return keys.join(rel)

    def _fail(self, exc: Exception, what: str) -> StoreError:
        import botocore.exceptions as bx

        where = f"s3://{self.bucket}/{self.prefix}"
        if isinstance(exc, bx.ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            if code == "NoSuchBucket":
                return StoreError(f"{where}: no such bucket {self.bucket!r}")
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                return StoreError(f"{where}: access denied ({code}) while trying to {what}")
            return StoreError(f"{where}: {code or 'error'} while trying to {what}: {err.get('Message', '')}".rstrip(": "))
        if isinstance(exc, bx.NoCredentialsError):
            return StoreError(f"{where}: no AWS credentials (set AWS_PROFILE, AWS_ACCESS_KEY_ID or ~/.aws/credentials)")
        if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ConnectionClosedError)):
            return StoreError(f"{where}: cannot reach the S3 endpoint ({exc})")
        if isinstance(exc, bx.BotoCoreError):
            return StoreError(f"{where}: {exc}")
        raise exc

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        import botocore.exceptions as bx

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._name(key))
            stream = response["Body"]
            try:
                where = f"s3://{self.bucket}/{self._name(key)}"
                size = response.get("ContentLength")
                if limit is None:
                    whole: bytes = stream.read()  # the writer's own bookkeeping reads
                    return whole
                if isinstance(size, int) and size > limit:
                    raise limits.too_big(where, size, limit)
                body: bytes = stream.read(limit + 1)  # never more than the bound, whatever is sent
                if len(body) > limit:
                    raise limits.too_big(where, None, limit)
                return body
            finally:
                stream.close()
        except bx.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in MISSING_KEY_CODES:
                return None
            raise self._fail(exc, f"get {key}") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, f"get {key}") from exc

    def _put(self, key: str, data: bytes) -> None:
        import botocore.exceptions as bx

        try:
            self.client.put_object(Bucket=self.bucket, Key=self._name(key), Body=data)
        except (bx.ClientError, bx.BotoCoreError) as exc:
            raise self._fail(exc, f"put {key}") from exc
        with self._lock:
            self._put_keys.append(key)

    def _delete(self, key: str) -> None:
        self._delete_many([key])

    def _delete_many(self, keys_: list[str]) -> None:
        import botocore.exceptions as bx

        for i in range(0, len(keys_), 1000):
            batch = [{"Key": self._name(k)} for k in keys_[i:i + 1000]]
            try:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            except (bx.ClientError, bx.BotoCoreError) as exc:
                raise self._fail(exc, "delete objects") from exc

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        import botocore.exceptions as bx

        name = self._name(prefix).rstrip("/")
        name = f"{name}/" if name else ""
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=name):
                for obj in page.get("Contents", []):
                    yield self._key(obj["Key"])
        except (bx.ClientError, bx.BotoCoreError) as exc:
            raise self._fail(exc, f"list {prefix}") from exc

    def list_dir(self, prefix: str = "/") -> list[str]:
        """Immediate children with one delimiter listing per page (netcdf-c's S3 search)."""
        import botocore.exceptions as bx

        name = self._name(keys.validate(prefix)).rstrip("/")
        name = f"{name}/" if name else ""
        out: set[str] = set()
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=name,
                                                                           Delimiter="/")
            for page in pages:
                for cp in page.get("CommonPrefixes", []):
                    out.add(cp["Prefix"][len(name):].strip("/"))
                for obj in page.get("Contents", []):
                    out.add(obj["Key"][len(name):])
        except (bx.ClientError, bx.BotoCoreError) as exc:
            raise self._fail(exc, f"list {prefix}") from exc
        return sorted(n for n in out if n)

    def _dataset_exists(self) -> bool:
        return any(self._get(k) is not None for k in ("/.zgroup", "/.zarray"))

    def commit(self) -> None:
        if self.mode != "w":
            return
        stale = sorted(self._existing - set(self._put_keys))
        if stale:
            self._delete_many(stale)
        self.mode = "done"

    def abort(self) -> None:
        """Delete what this writer put (a failed conversion leaves no partial dataset).

        An append ('a') deletes nothing: it may have rewritten existing chunks (with the same
        values where the old data was), and its metadata, put last, was not reached.
        """
        if self.mode == "w" and self._put_keys and not self._existing:
            self._delete_many(list(self._put_keys))
        self.mode = "done"

    def __repr__(self) -> str:
        return f"S3Store('s3://{self.bucket}/{self.prefix}')"
