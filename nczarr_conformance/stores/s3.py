"""S3 backend on botocore (boto3's core), as netcdf-c's ``mode=…,s3`` names it.

Endpoint, region and credentials are found the way AWS tools find them
(``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``~/.aws/config``, ``~/.aws/credentials``),
plus what the URL says: an https host (path or virtual-host style) and a profile
in the fragment (``aws.profile=NAME`` as netcdf-c's tests write it, or nczarr.md's
``awsprofile=NAME``). Every botocore failure is mapped here, once, to a
:class:`StoreError` with one readable line. ``requests`` records each S3
operation sent, so tests can hold the reader to its request budget.

Writing, and why in this order (S3 has no rename, so readers see each PUT at once):

* Opening for writing refuses a prefix that holds any object unless ``--overwrite``; with
  it, the prefix must hold a dataset and nothing else (its objects are found from the
  ``.zgroup``/``.zarray``/``.zattrs`` keys, see :func:`safety.split_dataset_keys`): other
  objects, a bucket root with no dataset in it included, make the writer refuse, and only
  the old dataset's objects are ever deleted.
* Opening for writing (any mode) claims the prefix with a marker object ``.nczarr-partial``
  (host, PID, command and mode of the writer), PUT only if no other writer's marker is there
  (``If-None-Match``) or only over the dead writer's marker just read (``If-Match``): one
  writer at a time, the second refused in one line naming the first (see ``_open_for_writing``
  for a dead writer's marker). At the first chunk PUT an overwrite deletes the old dataset's
  root metadata (``.zmetadata``, ``.zgroup``, ``.zattrs``, then every other metadata object),
  so during the write the prefix reads as "no dataset", never as old metadata over new chunks.
* Chunks are PUT as they come, many at once (see s3_upload.py: a bounded pool, a byte
  budget, multipart above 16 MiB); metadata objects are held back and PUT at ``commit()``
  once every chunk is up, after the old dataset's objects that were not rewritten are
  deleted (a chunk the new dataset leaves out as all-fill must not show the old one's
  data), children first (one depth at a time, in parallel) and the root ``.zgroup`` (then
  ``.zmetadata``) last; the marker is deleted last of all.
* An append PUTs its chunks (new ones lie outside the old shapes, the rewritten edge chunk or
  shard keeps the old values, so the old dataset reads the same), then at ``commit()`` deletes
  the root ``.zgroup``/``.zmetadata`` (Zarr v3: the root ``zarr.json``), PUTs the new metadata
  and the root last. ``abort()`` during that phase puts the old metadata back.

Mode ``u`` (nczarr-fix's in-place update) PUTs each object at once and nothing else (under
its marker): an S3 PUT replaces one object atomically, which is all an in-place metadata fix needs.

So an interrupted overwrite leaves an unreadable prefix (old dataset gone, marker present),
an interrupted append leaves the old dataset or, killed during its metadata phase, an
unreadable one — never a readable mix. ``abort()`` removes everything the writer put and,
for an overwrite, what is left of the old dataset. A dead writer's marker (its PID gone) over
a complete dataset (the root ``.zgroup`` there: an append killed before its metadata phase, or
any writer killed after its root went in) is "interrupted, the dataset is intact": never taken
as leftovers. Over no complete dataset, the next write removes a dead create's or overwrite's
leftovers (dataset-shaped keys only); a dead append's need ``--overwrite``.

Retries are botocore's "standard" mode (exponential backoff with jitter on throttling,
5xx and dropped connections): 3 attempts a request for reading, 8 for writing, so a
throttled upload rides out S3's ``SlowDown`` while an unreachable endpoint is still
reported at once. ``AWS_MAX_ATTEMPTS`` and ``AWS_RETRY_MODE`` (or ``max_attempts`` and
``retry_mode`` in the profile) override both, as for every AWS tool. A GET whose body ends
short of its Content-Length (botocore retries only what fails before the body streams) is
sent again as many times, with botocore's backoff. A 5xx, an unreachable endpoint or a cut
body after every retry is :class:`StoreUnavailableError`: nczarr-check's "could not check".
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

from nczarr_conformance import keys, limits, safety
from nczarr_conformance.errors import StoreError, StoreUnavailableError, UsageError
from nczarr_conformance.stores.base import Pin, Store
from nczarr_conformance.stores.s3_generation import Generation, Pinned
from nczarr_conformance.stores.s3_upload import Uploader
from nczarr_conformance.urls import StoreSpec

MISSING_KEY_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
READ_ATTEMPTS = 3  # per request, the first one included
WRITE_ATTEMPTS = 8
UPLOAD_CONCURRENCY = 16
UPLOAD_IN_FLIGHT_BYTES = 64 * 1024**2
MULTIPART_THRESHOLD = 16 * 1024**2
PART_SIZE = 8 * 1024**2
_CLIENTS: dict[tuple[str | None, str | None, str | None, str | None, bool], tuple[Any, Any]] = {}
_CLIENTS_LOCK = threading.Lock()
#: the root objects an append deletes before its metadata PUTs and puts (back) last, in this order:
#: without them no reader opens the dataset (v2's root group, then its consolidated metadata; v3's
#: root ``zarr.json``, which holds the consolidated metadata)
_ROOT_OPENERS = ("/.zgroup", "/.zmetadata", "/zarr.json")


class _CutShort(Exception):
    """A GET's body ended before its Content-Length: the connection dropped mid-body."""


def _clients(endpoint: str | None, profile: str | None, region: str | None,
             anonymous: bool = False) -> tuple[Any, Any]:
    """A reading and a writing botocore client per (endpoint, profile, region, AWS_ENDPOINT_URL, unsigned).

    ``anonymous``: unsigned requests, no credentials looked for (a public bucket; netcdf-c's
    ``aws.profile=no``); the profile is then not read.

    Making the first costs ~0.1 s, the second ~5 ms. They differ in retries only (see the
    module docstring); both keep enough connections for every upload thread.
    """
    import botocore
    import botocore.config
    import botocore.session

    cache_key = (endpoint, None if anonymous else profile, region, os.environ.get("AWS_ENDPOINT_URL"), anonymous)
    with _CLIENTS_LOCK:
        if cache_key in _CLIENTS:
            return _CLIENTS[cache_key]
        # botocore's own session and clients (what boto3's wrap): importing boto3 and its s3transfer cost a
        # read's open 0.13 s and nothing here uses what they add
        core = botocore.session.Session(profile=None if anonymous else profile)
        scoped = core.get_scoped_config()  # raises ProfileNotFound for an unknown profile
        attempts = core.get_config_variable("max_attempts")
        mode = os.environ.get("AWS_RETRY_MODE") or scoped.get("retry_mode") or "standard"
        kwargs: dict[str, Any] = {"region_name": region or core.get_config_variable("region") or "us-east-1"}
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        unsigned: dict[str, Any] = {"signature_version": botocore.UNSIGNED} if anonymous else {}
        pair = tuple(
            core.create_client("s3", config=botocore.config.Config(
                retries={"total_max_attempts": int(attempts or default), "mode": mode}, connect_timeout=5,
                read_timeout=60, max_pool_connections=UPLOAD_CONCURRENCY + 16, s3={"addressing_style": "path"},
                **unsigned), **kwargs)
            for default in (READ_ATTEMPTS, WRITE_ATTEMPTS))
        _CLIENTS[cache_key] = (pair[0], pair[1])
        return _CLIENTS[cache_key]


class S3Store(Store):
    kind = "s3"
    read_concurrency = 16  # concurrent GETs (the client's pool holds UPLOAD_CONCURRENCY + 16 connections)
    waits_on_network = True
    _hold: safety.WriterLock | None = None  # the claimed marker, from opening for writing until commit or abort

    def __init__(self, bucket: str, prefix: str, *, mode: str = "r", overwrite: bool = False,
                 endpoint: str | None = None, profile: str | None = None, region: str | None = None,
                 anonymous: bool = False, concurrency: int = UPLOAD_CONCURRENCY,
                 in_flight_bytes: int = UPLOAD_IN_FLIGHT_BYTES,
                 multipart_threshold: int = MULTIPART_THRESHOLD, part_size: int = PART_SIZE) -> None:
        """``concurrency`` PUTs at once, holding at most ``in_flight_bytes`` (see s3_upload.py)."""
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
            self.client, self.write_client = _clients(endpoint, profile, region, anonymous)
        except bx.BotoCoreError as exc:  # ProfileNotFound and friends
            raise StoreError(f"s3://{bucket}/{self.prefix}: {exc}") from exc
        self._recorder = self._record
        for client in (self.client, self.write_client):
            client.meta.events.register("before-parameter-build.s3.*", self._recorder)
        self._upload_options = {"concurrency": concurrency, "in_flight_bytes": in_flight_bytes,
                                "multipart_threshold": multipart_threshold, "part_size": part_size}
        self._uploader: Uploader | None = None
        self._held: dict[str, bytes] = {}  # metadata, PUT at commit
        self._old: list[str] = []  # the old dataset's objects ('w') or every object ('a')
        self._begun = False
        self._begin_lock = threading.Lock()
        self._restore: dict[str, bytes | None] = {}  # append: metadata to put back on abort
        # a reader pins the dataset it opened (see s3_generation.py); writers read their own objects
        self._generation = Generation(f"s3://{bucket}/{self.prefix}", self._head) if mode == "r" else None
        # "u" updates in place (nczarr-fix): each put is one PUT at once, under its marker; no deletes
        if mode in ("w", "a", "u"):
            self.writable = True
            self._open_for_writing(mode, overwrite)

    def _open_for_writing(self, mode: str, overwrite: bool) -> None:
        """Check the prefix, then claim it (the marker) before anything else is written.

        A dead writer's marker (same host, PID gone) over a complete dataset (:meth:`_complete`)
        means that writer died without changing what readers see, or after its new dataset was
        whole: the dataset is intact. An append or a fix then proceeds, removing only that
        writer's chunks outside every array's grid (provably not part of the dataset); a new
        write without ``--overwrite`` is refused and nothing is deleted. Over no complete
        dataset, a dead create's or overwrite's marker leaves only leftovers (removed by the next
        write); a dead append's (or fix's) leaves the old chunks under half-replaced metadata,
        replaced only with ``--overwrite``.
        """
        where = f"s3://{self.bucket}/{self.prefix}"
        key = self._hold_key()
        ours = safety.holding(key)  # claimed already by this process (stores.lock_for_writing)
        record: Any = None
        etag = None
        with safety.interruptible():  # reads only, nothing claimed yet: a signal ends a stalled endpoint's wait
            if mode == "u":  # an update needs the listing only over a dead writer's marker
                if not ours:
                    record, etag = self._marker()
                existing = set(self._list_prefix("/")) if etag is not None else set()
            else:
                existing = set(self._list_prefix("/"))
                if safety.S3_MARKER in existing and not ours:
                    record, etag = self._marker()
        dead: dict[str, Any] | None = None
        orphans: list[str] = []  # a dead append's chunks outside the grid, removed once the marker is ours
        if etag is not None:
            if safety.record_is_live(record):
                raise safety.another_writer(where, record, safety.S3_MARKER[1:])
            dead = record if isinstance(record, dict) else {}
        existing.discard(safety.S3_MARKER)
        complete = dead is None or self._complete(existing)
        if dead is not None and not complete:
            holder = safety.describe_holder(dead)
            if dead.get("mode") not in (None, "w") and not (mode == "w" and overwrite):  # an append's, a fix's
                raise StoreError(f"{where}: a writer that died ({holder}) was replacing the metadata: the chunks are "
                                 "there, the root metadata is not; not touched (--overwrite replaces it)")
            if mode != "w":
                raise StoreError(f"{where}: holds the leftovers of an interrupted write ({holder}), no dataset; "
                                 "write it again instead")
            foreign = sorted(k for k in existing if not safety.is_dataset_shaped(k))
            if foreign:
                raise StoreError(f"{where}: holds {foreign[0].lstrip('/')}, which is not part of a Zarr dataset; "
                                 "not replaced")
            self._old = sorted(existing)  # a dead writer's leftovers: ours to remove
        elif mode != "w":
            self._old = sorted(existing)
            if dead is not None:
                orphans = safety.orphan_chunks(existing, self._zarrays(existing))
        elif existing and not overwrite:
            first = min(existing).lstrip("/")
            left = f", left complete by a writer that died ({safety.describe_holder(dead)})" if dead is not None else ""
            raise StoreError(f"{where}: holds {len(existing)} object(s) ({first}…){left}; use --overwrite to replace "
                             "a dataset there")
        elif existing:
            self._old = safety.refuse_foreign(where, existing)
        self._hold = safety.hold(key, where, lambda: self._claim(mode, etag))
        if dead is not None:
            try:
                self._abort_dead_uploads()
                if orphans:
                    self._delete_many(orphans)
                    self._old = sorted(set(self._old) - set(orphans))
            except BaseException:
                self._release()
                raise

    def _hold_key(self) -> str:
        endpoint = self.client.meta.endpoint_url
        return f"s3:{endpoint}/{self.bucket}/{self.prefix}"

    def _marker(self) -> tuple[Any, str | None]:
        """The marker's record (None when unreadable) and its ETag (None when gone)."""
        raw, etag = self._fetch(safety.S3_MARKER, 4096)
        try:
            record = json.loads(raw or b"")
        except ValueError:
            record = None
        return record, etag

    def _fetch(self, key: str, limit: int) -> tuple[bytes | None, str | None]:
        """A writer's look at one small object before it claims the prefix: its first ``limit + 1``
        bytes (more than ``limit`` is never JSON we accept) and its ETag; (None, None) when missing."""
        import botocore.exceptions as bx

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._name(key))
            try:
                raw: bytes = response["Body"].read(limit + 1)
            finally:
                response["Body"].close()
        except bx.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in MISSING_KEY_CODES:
                return None, None
            raise self._fail(exc, f"get {key}") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, f"get {key}") from exc
        return (None if len(raw) > limit else raw), response.get("ETag")

    def _json(self, key: str) -> Any:
        """A metadata object parsed (None when missing, too big or not JSON)."""
        raw, _ = self._fetch(key, limits.max_metadata_bytes())
        try:
            return json.loads(raw) if raw is not None else None
        except ValueError:
            return None

    def _complete(self, existing: set[str]) -> bool:
        """Whether the prefix holds a dataset readers open: its root ``.zgroup`` (or a root array's
        ``.zarray``, or Zarr v3's root ``zarr.json``) is there and is a JSON object.

        Every writer puts the root object after every other object of the new dataset and
        an append deletes it before its first metadata PUT, so present means either the
        writer never touched what readers read, or its new dataset was whole.
        """
        for key in ("/zarr.json", "/.zgroup", "/.zarray"):
            if key in existing:
                return isinstance(self._json(key), dict)
        return False

    def _zarrays(self, existing: set[str]) -> dict[str, Any]:
        """Each array's parsed ``.zarray`` or v3 ``zarr.json`` (one not parsed: none of its chunks is
        called an orphan; a v3 group's is not an array's)."""
        out = {keys.parent(k): self._json(k) for k in existing if keys.basename(k) in (".zarray", "zarr.json")}
        return {node: meta for node, meta in out.items() if isinstance(meta, dict)
                and (meta.get("zarr_format") != 3 or meta.get("node_type") == "array")}

    def _claim(self, mode: str, dead_etag: str | None) -> safety.Release:
        """PUT the marker only if no other writer's is there (``If-None-Match: *``), or only over
        the dead writer's marker we read (``If-Match``): of two writers that raced past the
        checks, one gets the prefix and the other the refusal. An S3 service without
        conditional writes (501) gets a plain PUT: the checks before were the guard, as before.
        """
        import botocore.exceptions as bx

        where = f"s3://{self.bucket}/{self.prefix}"
        body = json.dumps(safety.holder_record(mode)).encode()
        condition = {"IfMatch": dead_etag} if dead_etag else {"IfNoneMatch": "*"}
        try:
            self.write_client.put_object(Bucket=self.bucket, Key=self._name(safety.S3_MARKER), Body=body,
                                         **condition)
        except bx.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NotImplemented", "501"):
                self._put_now(safety.S3_MARKER, body)
            elif code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409", *MISSING_KEY_CODES):
                record, _ = self._marker()
                mine = isinstance(record, dict) and record.get("pid") == os.getpid() and \
                    record.get("host") == socket.gethostname()
                if not mine:  # (ours when a retried PUT had landed the first time)
                    raise safety.another_writer(where, record, safety.S3_MARKER[1:]) from exc
            else:
                raise self._fail(exc, "put the writer marker") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, "put the writer marker") from exc
        return self._unclaim

    def _unclaim(self) -> None:
        """Delete the marker (best effort: a marker left over a complete dataset is harmless now)."""
        with contextlib.suppress(StoreError):
            self._delete_many([safety.S3_MARKER])

    def _release(self) -> None:
        """Let the claim go (once): after the commit or the abort, or a failed open."""
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.release()

    @classmethod
    def from_spec(cls, spec: StoreSpec, mode: str = "r", overwrite: bool = False) -> S3Store:
        """The store a URL names; ``storage_options`` may name the endpoint, region and profile (``endpoint_url``,
        ``region_name`` or ``region``, ``profile``, also inside s3fs's ``client_kwargs``); credentials come from
        the profile or the environment, as for every AWS tool."""
        bucket, _, prefix = spec.path.partition("/")
        if spec.anonymous and mode != "r":
            raise UsageError(f"s3://{spec.path}: unsigned (anon, aws.profile=no) is for reading; writing needs "
                             "credentials")
        options = _signed_options(spec)
        profile = options.get("profile") or spec.params.get("aws.profile") or spec.params.get("awsprofile")
        region = options.get("region") or spec.params.get("aws.region")
        endpoint = options.get("endpoint") or spec.endpoint
        if endpoint and endpoint.split("://")[-1].split(":")[0].endswith("amazonaws.com"):
            endpoint = None  # AWS itself: boto3 picks the regional endpoint (or AWS_ENDPOINT_URL)
        return cls(bucket, prefix, mode=mode, overwrite=overwrite, endpoint=endpoint, profile=profile, region=region,
                   anonymous=spec.anonymous)

    @classmethod
    def reopen(cls, spec: StoreSpec, pin: Pin | None) -> S3Store:
        """The prefix ``spec`` names, read here through the endpoint and region another process's
        reader used (found in its environment, maybe not in this one's) and held to its pin."""
        store = cls.from_spec(at_pinned_place(spec, pin))
        try:
            store.hold_to(pin)
        except BaseException:
            store.close()
            raise
        return store

    def pin(self) -> Pin | None:
        """The endpoint, the region and the root metadata pinned at open (see s3_generation.py): a
        worker holding to them reads the objects of the dataset opened here, or raises the error a
        reader here would."""
        if self._generation is None:
            return None
        return "s3", self.client.meta.endpoint_url, self.client.meta.region_name, self._generation.pinned()

    def hold_to(self, pin: Pin | None) -> None:
        """Take over another process's pin before reading anything: every object read is then checked
        against its root and its clock, by the rules a reader there follows (s3_generation.py)."""
        if pin is None:
            return
        if self._generation is None or self.reads or len(pin) != 4 or pin[0] != "s3":
            raise StoreError(f"{self!r}: cannot be held to {pin[0]!r} pinned by another process")
        pinned = cast(Pinned | None, pin[3])  # what Generation.pinned gave the other process
        if pinned is not None:
            self._generation.restore(pinned)

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        """One entry per request on this prefix; a DeleteObjects batch, one entry per key it deletes."""
        if params.get("Bucket") != self.bucket:
            return
        batch = params.get("Delete", {}).get("Objects", []) if model.name == "DeleteObjects" else []
        names = [str(o.get("Key", "")) for o in batch] or [str(params.get("Key", params.get("Prefix", "")))]
        with self._lock:
            self.requests.extend((model.name, name) for name in names if name.startswith(self.prefix))

    def close(self) -> None:
        """Stop recording requests on the shared clients (and let go of an update's claim)."""
        for client in (self.client, self.write_client):
            client.meta.events.unregister("before-parameter-build.s3.*", self._recorder)
        self._release()

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
            meta = exc.response.get("ResponseMetadata", {})
            retried, status = meta.get("RetryAttempts"), meta.get("HTTPStatusCode")
            tries = f" (gave up after {retried + 1} attempts)" if isinstance(retried, int) and retried else ""
            kind = StoreUnavailableError if isinstance(status, int) and status >= 500 else StoreError
            return kind(f"{where}: {code or 'error'} while trying to {what}{tries}: "
                        f"{err.get('Message', '')}".rstrip(": "))
        if isinstance(exc, bx.NoCredentialsError):
            return StoreError(f"{where}: no AWS credentials (set AWS_PROFILE, AWS_ACCESS_KEY_ID or ~/.aws/credentials)")
        if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ConnectionClosedError)):
            return StoreUnavailableError(f"{where}: cannot reach the S3 endpoint ({exc})")
        if isinstance(exc, bx.BotoCoreError):
            return StoreError(f"{where}: {exc}")
        raise exc

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        """One object's bytes; a body cut short is fetched again (see :meth:`_get_whole`)."""
        import botocore.exceptions as bx

        try:
            return self._get_whole(key, limit)
        except bx.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in MISSING_KEY_CODES:
                if self._generation is not None:
                    self._generation.missing(key)
                return None
            raise self._fail(exc, f"get {key}") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, f"get {key}") from exc

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        """One ranged GET (HTTP ``Range``); the object's size from its ``Content-Range``."""
        import botocore.exceptions as bx

        if length == 0:
            head = self._head(key)
            return None if head is None else (b"", int(head.get("ContentLength", 0)))
        spec = f"bytes=-{-start}" if start < 0 else f"bytes={start}-{start + length - 1}"
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._name(key), Range=spec)
        except bx.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            if code in MISSING_KEY_CODES:
                return None
            if code == "InvalidRange":  # past the end (or an empty object)
                head = self._head(key)
                return None if head is None else (b"", int(head.get("ContentLength", 0)))
            raise self._fail(exc, f"get {key} ({spec})") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, f"get {key} ({spec})") from exc
        stream = response["Body"]
        try:
            body: bytes = stream.read(length + 1)
        except (bx.ResponseStreamingError, bx.IncompleteReadError, bx.ReadTimeoutError,
                bx.ConnectionClosedError) as exc:
            raise StoreError(f"s3://{self.bucket}/{self._name(key)}: range {spec} cut short ({exc})") from exc
        finally:
            stream.close()
        total = str(response.get("ContentRange", "")).rpartition("/")[2]
        size = int(total) if total.isdigit() else len(body)
        return body[:length], size

    def metadata_read(self) -> None:
        if self._generation is not None:
            self._generation.settle()

    def _head(self, key: str) -> dict[str, Any] | None:
        """HEAD one object: its response, None when it is missing."""
        import botocore.exceptions as bx

        try:
            response: dict[str, Any] = self.client.head_object(Bucket=self.bucket, Key=self._name(key))
            return response
        except bx.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in MISSING_KEY_CODES:
                return None
            raise self._fail(exc, f"head {key}") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, f"head {key}") from exc

    def _get_whole(self, key: str, limit: int | None) -> bytes | None:
        """GET until the body holds its Content-Length: as many tries as the client's retry policy allows.

        botocore retries a request that fails before its body streams; a connection dropped
        mid-body reaches the caller as fewer bytes (or a streaming error), which nothing else
        notices. Those are tried again here with botocore's own backoff (standard mode, jitter).
        """
        from botocore.retries.standard import ExponentialBackoff, RetryContext

        attempts = int(self.client.meta.config.retries.get("total_max_attempts") or READ_ATTEMPTS)
        backoff, why = ExponentialBackoff(), ""
        for attempt in range(1, attempts + 1):
            try:
                return self._get_once(key, limit)
            except _CutShort as exc:
                why = str(exc)
            if attempt < attempts:
                time.sleep(backoff.delay_amount(RetryContext(attempt_number=attempt)))
        raise StoreUnavailableError(f"s3://{self.bucket}/{self._name(key)}: the response was cut short ({why}) on "
                                    f"each of {attempts} attempts")

    def _get_once(self, key: str, limit: int | None) -> bytes | None:
        """One GET: the whole body, or LimitError past ``limit``, or _CutShort when fewer bytes came than sent."""
        import botocore.exceptions as bx

        response = self.client.get_object(Bucket=self.bucket, Key=self._name(key))
        stream = response["Body"]
        where = f"s3://{self.bucket}/{self._name(key)}"
        size = response.get("ContentLength")
        try:
            if limit is not None and isinstance(size, int) and size > limit:
                raise limits.too_big(where, size, limit)
            try:  # never more than the bound, whatever is sent; unbounded only for the writer's own bookkeeping
                body: bytes = stream.read() if limit is None else stream.read(limit + 1)
            except (bx.ResponseStreamingError, bx.IncompleteReadError, bx.ReadTimeoutError,
                    bx.ConnectionClosedError) as exc:
                raise _CutShort(str(exc)) from exc
        finally:
            stream.close()
        if limit is not None and len(body) > limit:
            raise limits.too_big(where, None, limit)
        if isinstance(size, int) and len(body) < size:
            raise _CutShort(f"{len(body)} of {size} bytes")
        if self._generation is not None:
            self._generation.seen(key, response)
        return body

    def _put(self, key: str, data: bytes) -> None:
        if self.mode == "u":
            self._put_now(key, data)
            return
        if keys.basename(key) in safety.META_NAMES:
            with self._lock:
                self._held[key] = data
            return
        self._begin()
        with self._lock:
            self._put_keys.append(key)  # before the PUT: an abort deletes whatever may have landed
        self._uploads().submit(self._name(key), data)

    def _uploads(self) -> Uploader:
        with self._begin_lock:
            if self._uploader is None:
                self._uploader = Uploader(self.write_client, self.bucket, self._upload_error, **self._upload_options)
            return self._uploader

    def _upload_error(self, name: str, exc: Exception) -> Exception:
        """An upload's failure as the one line to report (anything unexpected as it is)."""
        try:
            return self._fail(exc, f"put {self._key(name)}")
        except Exception as other:  # _fail re-raises what it cannot word: reported as it is
            return other

    def _put_now(self, key: str, data: bytes) -> None:
        import botocore.exceptions as bx

        try:
            self.write_client.put_object(Bucket=self.bucket, Key=self._name(key), Body=data)
        except (bx.ClientError, bx.BotoCoreError) as exc:
            raise self._fail(exc, f"put {key}") from exc

    def _begin(self) -> None:
        """Before the first PUT (the marker is ours since opening): for an overwrite, the old metadata
        goes (root first)."""
        with self._begin_lock:  # not self._lock: the request recorder takes that one
            if self._begun:
                return
            if self.mode == "w" and self._old:
                meta = [k for k in self._old if keys.basename(k) in safety.META_NAMES]
                root = [k for k in safety.ROOT_META if k in meta]
                self._delete_many(root)
                self._delete_many(sorted(set(meta) - set(root)))
            self._begun = True

    def _abort_dead_uploads(self) -> None:
        """Abort the multipart uploads a killed writer left open under the prefix (unseen, yet billed).

        Only dataset-shaped keys, and only when the marker says the writer is dead.
        """
        import botocore.exceptions as bx

        prefix = f"{self.prefix}/" if self.prefix else ""
        try:
            for page in self.write_client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket,
                                                                                          Prefix=prefix):
                for upload in page.get("Uploads", []):
                    if safety.is_dataset_shaped(self._key(upload["Key"])):
                        self.write_client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"],
                                                                 UploadId=upload["UploadId"])
        except (bx.ClientError, bx.BotoCoreError) as exc:
            raise self._fail(exc, "abort a dead writer's multipart uploads") from exc

    def _delete(self, key: str) -> None:
        self._delete_many([key])

    def _delete_many(self, keys_: list[str]) -> None:
        import botocore.exceptions as bx

        for i in range(0, len(keys_), 1000):
            batch = [{"Key": self._name(k)} for k in keys_[i:i + 1000]]
            try:
                self.write_client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
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

    def commit(self) -> None:
        try:
            self._commit()
        finally:
            self._release()  # the marker goes last of all

    def _commit(self) -> None:
        if self.mode not in ("w", "a"):
            return
        self._quiesce()
        try:
            if self._uploader is not None:
                self._uploader.drain()  # every chunk is up before any metadata; interruptible
        except BaseException:
            self.abort()
            raise
        with safety.critical():
            try:
                safety.raise_if_interrupted()
                self._begin()
                if self.mode == "w":
                    put = set(self._put_keys) | set(self._held)
                    stale = sorted(k for k in self._old if k not in put)
                    if stale:
                        self._delete_many(stale)
                else:
                    for key in [*self._held, *safety.ROOT_META]:
                        if key not in self._restore:
                            self._restore[key] = self._get(key)
                    root = [k for k in safety.ROOT_META if self._restore.get(k) is not None
                            and k in _ROOT_OPENERS]
                    self._delete_many(root)
                self._put_metadata()
                if self.mode == "a":  # the old root object readers open by, when the append did not rewrite it
                    for key in _ROOT_OPENERS:
                        old = self._restore.get(key)
                        if key not in self._held and old is not None:
                            self._put_now(key, old)
            except BaseException:
                self._cancel_uploads()
                self._abort_writes()
                raise
            self.mode = "done"
            if self._uploader is not None:
                self._uploader.close()

    def _put_metadata(self) -> None:
        """The held metadata, deepest first: each depth in parallel, the root's objects one by one, in order."""
        order = self._metadata_order()
        root = [k for k in order if len(keys.split(k)) == 1]
        levels: dict[int, list[str]] = {}
        for key in order:
            if key not in root:
                levels.setdefault(len(keys.split(key)), []).append(key)
        for depth in sorted(levels, reverse=True):
            uploads = self._uploads()
            for key in levels[depth]:
                with self._lock:
                    self._put_keys.append(key)
                uploads.submit(self._name(key), self._held[key], interruptible=False)
            uploads.drain(interruptible=False)  # in commit's critical section: finish what was begun
        for key in root:
            with self._lock:
                self._put_keys.append(key)
            self._put_now(key, self._held[key])

    def _cancel_uploads(self) -> None:
        """Stop the upload pool: queued PUTs dropped, the running ones waited for, multipart uploads aborted."""
        if self._uploader is not None:
            self._uploader.cancel()

    def _metadata_order(self) -> list[str]:
        """Held metadata: deepest first, the root's last with .zgroup then .zmetadata (v3: the root
        zarr.json, holding the consolidated metadata) at the very end."""
        last = {"/.zattrs": 0, "/.zarray": 1, "/.zgroup": 2, "/.zmetadata": 3, "/zarr.json": 4}
        return sorted(self._held, key=lambda k: (k in last, last.get(k, 0), -len(keys.split(k)), k))

    def abort(self) -> None:
        """Remove what this writer put (see the module docstring); best effort, never raises."""
        try:
            if self.mode in ("w", "a"):
                self._quiesce()
                with safety.critical():
                    self._cancel_uploads()
                    self._abort_writes()
        finally:
            self._release()

    def _abort_writes(self) -> None:
        mode, self.mode = self.mode, "done"
        if not self._begun:
            return
        try:
            if mode == "a":
                new = [k for k in self._put_keys if k not in self._old and k not in self._restore]
                self._delete_many(new)
                restore = [k for k in self._restore if self._restore[k] is not None]
                for key in sorted(restore, key=lambda k: (k in _ROOT_OPENERS, _ROOT_OPENERS.index(k)
                                                           if k in _ROOT_OPENERS else 0)):
                    data = self._restore[key]
                    if data is not None:
                        self._put_now(key, data)
            else:
                self._delete_many(sorted(set(self._put_keys) | set(self._old)))
        except (StoreError, OSError):
            pass  # the write's own error is the one worth reporting

    def __repr__(self) -> str:
        return f"S3Store('s3://{self.bucket}/{self.prefix}')"


#: storage options the signed store takes (fsspec/s3fs spellings → ours)
_SIGNED_OPTIONS = {"endpoint_url": "endpoint", "endpoint": "endpoint", "region_name": "region", "region": "region",
                   "profile": "profile"}


def _signed_options(spec: StoreSpec) -> dict[str, str]:
    """``storage_options`` for boto3; any other key is refused in one line rather than dropped."""
    flat: dict[str, Any] = {}
    for name, value in spec.options.items():
        if name == "client_kwargs" and isinstance(value, dict):
            flat.update(value)
        elif name != "anon":  # anon=True is spec.anonymous (the unsigned client); anon=False: signed, as without it
            flat[name] = value
    unknown = sorted(k for k in flat if k not in _SIGNED_OPTIONS)
    if unknown:
        raise UsageError(f"s3://{spec.path}: storage option(s) {', '.join(unknown)} not taken by the signed S3 store "
                         f"(it takes {', '.join(sorted(_SIGNED_OPTIONS))}, and anon=True for unsigned reads)")
    return {_SIGNED_OPTIONS[k]: str(v) for k, v in flat.items()}


def at_pinned_place(spec: StoreSpec, pin: Pin | None) -> StoreSpec:
    """``spec`` at the endpoint and region another process's S3 reader pinned (its ``pin()``: found in its
    environment, maybe not in this one's); ``spec`` itself for no pin or another store's."""
    if pin is None or len(pin) != 4 or pin[0] != "s3":
        return spec
    params = dict(spec.params, **({"aws.region": str(pin[2])} if pin[2] else {}))
    return dataclasses.replace(spec, endpoint=str(pin[1]) if pin[1] else None, params=params)


def hold_prefix(spec: StoreSpec) -> safety.WriterLock:
    """``stores.lock_for_writing`` on S3: the prefix's marker, claimed as an update (an append, a
    fix) claims it, held until released; the stores this process then opens on the prefix share it."""
    store = S3Store.from_spec(spec, "u")
    hold, store._hold = store._hold, None  # the claim outlives this store object: its release needs only the client
    store.close()  # stop recording its requests
    assert hold is not None
    return hold
