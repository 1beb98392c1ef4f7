"""Read-only stores on obstore: plain HTTP(S), unsigned S3, Google Cloud Storage, Azure Blob.

Why obstore (reports/remote-stores.md has the numbers): one wheel with no Python dependencies
serves all four (fsspec needs s3fs, gcsfs and adlfs, each with its cloud's SDK); it imports and
makes a client in ~16 ms (fsspec: 0.4 s for HTTP, 0.9 s for S3); its synchronous ``get`` is one
GET an object where s3fs sends a HEAD first; ``skip_signature`` is unsigned access on S3, GCS and
Azure alike; it ships type stubs. Signed S3 is read here too when obstore can be handed every
credential botocore would use (stores/s3_signed_read.py says when); otherwise, and for every write,
it stays on botocore (stores/s3.py): the writer's marker claim and ordered commit are built on it.

Our rules stay on top of the library, as on every store (stores/base.py):

* every read is bounded: an object whose declared size (``Content-Length``) is over the
  caller's limit is refused before its body is read, and the body is read piece by piece
  and refused as soon as it passes the limit, whatever the header said; a body shorter
  than declared is sent for again, as S3Store does;
* a missing object (404) is ``None``: fill for a chunk, "no dataset" for the root;
* a web server that declares no size (no ``Content-Length``: a chunked or close-delimited body,
  which obstore refuses) is read with the standard library's client instead, streamed and refused
  as soon as the body passes the caller's declared-size bound, under the store's timeout;
* 3 attempts a request (obstore's backoff with jitter on 5xx, dropped connections and
  timeouts) and a 5 s connect timeout, as S3Store reads, 5 min for a whole request (body
  included) unless the user sets another bound: ``storage_options={"timeout": seconds}`` or
  ``NCZARR_REMOTE_TIMEOUT``, which the timeout's message names; a 5xx or an
  unreachable server after them is :class:`StoreUnavailableError` ("could not check");
  every other refusal (401, 403, a bad option) one line of :class:`StoreError`;
* every library call runs in a daemon thread the caller waits for: obstore blocks in Rust,
  where Python runs no signal handler, so without it Ctrl-C and SIGTERM waited for the request's
  timeout. The wait is interrupted by the signal (the main thread) or checks the recorded
  signal a few times a second (a worker thread of ``nczarr-check --deep``), and the request
  left behind dies with the process;
* S3 (signed or not) records each request as ``(operation, bucket key)`` in ``requests``, as the
  botocore store does, so tests hold both readers to one request budget; it reads byte ranges
  (a shard's index, one inner chunk) with ranged GETs;
* S3 pins the dataset it opened (stores/s3_generation.py), as a signed reader does; obstore
  gives no server clock (``Date``), so the pinned root's Last-Modified stands in: a chunk written in
  an earlier second than the root costs its GET alone, one written in the root's own second (a small
  store written within a second) one HEAD of the root more.

Plain HTTP has no listing: ``list_prefix`` reads the server's directory index pages (what
``python -m http.server``, nginx ``autoindex`` and Apache write), the links below the page's
own URL; a server that gives none makes listing a one-line error, so nczarr-check and pure
Zarr without ``.zmetadata`` need an index, NCZarr and consolidated stores never list. Range
requests are never sent: each object is one whole GET, so a server without Range support
serves everything.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote, unquote, urljoin, urlsplit

from nczarr_conformance import keys, limits, safety
from nczarr_conformance.errors import (
    NczarrError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from nczarr_conformance.stores.base import Pin, RestartRead, Store, resolve_range
from nczarr_conformance.stores.s3_generation import Generation, Pinned
from nczarr_conformance.stores.s3_signed_read import obstore_credentials, read_attempts, region_of
from nczarr_conformance.urls import StoreSpec

if TYPE_CHECKING:
    from obstore import GetOptions
    from obstore.store import ClientConfig, ObjectStore, RetryConfig

READ_ATTEMPTS = 3  # per request, the first one included (as stores/s3.py reads)
PIECE = 1 << 20  # bytes streamed at a time: a body past its limit is refused within one piece
_MISSING_LENGTH = "Content-Length Header missing"  # obstore's refusal of a body that declares no size
_NO_BUCKET = "<Code>NoSuchBucket</Code>"  # S3's error body when the bucket, not the object, is missing
_S3_CODE = re.compile(r"<Code>([A-Za-z0-9.]+)</Code>")  # an S3 error body's code
_STATUS = re.compile(r"status code: (\d{3})([^:\n]*)")
DEFAULT_TIMEOUT = 300.0  # seconds a whole request may take (obstore's ``timeout``): a chunk over a slow link
TIMEOUT_ENV = "NCZARR_REMOTE_TIMEOUT"
_POLL = 0.2  # seconds between a worker thread's looks at the recorded signal while it waits for a request
_T = TypeVar("_T")
#: fsspec's names for what obstore's stores take, so ``storage_options`` written for xarray/zarr work
_ALIASES = {"endpoint_url": "endpoint", "region_name": "region", "key": "access_key_id",
            "secret": "secret_access_key", "token": "session_token"}


def _retry(attempts: int = READ_ATTEMPTS) -> RetryConfig:
    return {"max_retries": attempts - 1, "retry_timeout": dt.timedelta(seconds=120),
            "backoff": {"init_backoff": dt.timedelta(milliseconds=100), "max_backoff": dt.timedelta(seconds=5),
                        "base": 2}}


def _timeout(spec: StoreSpec, options: dict[str, Any]) -> tuple[float, str]:
    """(seconds a whole request may take, what set it, for the timeout's message); pops ``timeout`` from ``options``."""
    url = spec.url.partition("#")[0]
    if "timeout" in options:
        value: Any = options.pop("timeout")
        source = "storage option timeout"
    elif os.environ.get(TIMEOUT_ENV, "").strip():
        value, source = os.environ[TIMEOUT_ENV].strip(), TIMEOUT_ENV
    else:
        return DEFAULT_TIMEOUT, f"the default; set {TIMEOUT_ENV} or storage option timeout"
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"{url}: {source} must be a positive number of seconds, not {value!r}")
    return seconds, source


def _client(url: str | None, extra: Any = None, timeout: float = DEFAULT_TIMEOUT) -> ClientConfig:
    """Our timeouts (and plain http where the URL says so), then the caller's ``client_options`` over them."""
    # obstore's timeout covers a whole request, body included (boto3's 60 s is per socket read): 5 min a chunk
    config: dict[str, Any] = {"connect_timeout": dt.timedelta(seconds=5), "timeout": dt.timedelta(seconds=timeout)}
    if url is not None and url.lower().startswith("http://"):
        config["allow_http"] = True
    if isinstance(extra, Mapping):
        config.update(extra)
    return cast("ClientConfig", config)


class _CutShort(Exception):
    """A body ended before its Content-Length."""


_offloaded = threading.local()  # set in the threads :func:`_interruptible` starts: they call obstore directly


def _interruptible(call: Callable[[], _T]) -> _T:
    """``call()`` (obstore's requests) in a daemon thread, waited for in a way a signal ends.

    In the main thread the wait itself is interrupted (Python runs the handler, which raises); in
    another thread the recorded signal is looked at every :data:`_POLL` s, so a pool of readers
    stops too and the command's exit waits for no request. The thread left in its request is a
    daemon: it never holds the process up.
    """
    if getattr(_offloaded, "active", False):
        return call()
    outcome: list[Any] = []
    done = threading.Event()

    def work() -> None:
        _offloaded.active = True
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the waiting thread, raised there
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=work, name="nczarr-remote-read", daemon=True).start()
    while not done.wait(_POLL):
        safety.raise_if_interrupted()
    ok, value = outcome[0]
    if ok:
        return cast("_T", value)
    raise value


class RemoteStore(Store):
    """One dataset root on a remote object store or web server; reads only."""

    writable = False
    supports_deletes = False
    read_concurrency = 16  # concurrent range GETs: a chunk's latency, not its decoding, is the cost
    waits_on_network = True

    def __init__(self, store: ObjectStore, where: str, kind: str, *, pin: bool = False,
                 timeout: tuple[float, str] = (DEFAULT_TIMEOUT, "the default"), signed: bool = False,
                 place: tuple[str | None, str | None] = (None, None), attempts: int = READ_ATTEMPTS) -> None:
        """``store`` is rooted at the dataset (its prefix); ``pin`` holds reads to the dataset opened;
        ``timeout`` is the bound its client was given and what set it (for the timeout's message);
        ``signed``: S3 requests carry credentials; ``place``: S3's endpoint and region, for :meth:`pin`;
        ``attempts``: what the client's retry policy allows a request, for the messages."""
        super().__init__()
        self._store = store
        self.where = where
        self.kind = kind
        self.signed = signed
        self._place = place
        self._attempts = attempts
        self._timeout = timeout
        #: (operation, bucket key) of every S3 request, named as S3's API names them (stores/s3.py's too)
        self.requests: list[tuple[str, str]] = []
        self._bucket_prefix = where.removeprefix("s3://").partition("/")[2].strip("/") if kind == "s3" else ""
        #: a signed S3 reader's URL, for what only botocore does (listing a key obstore refuses to parse)
        self.botocore_spec: StoreSpec | None = None
        self._unsized = False  # a web server that sends no Content-Length: read with _get_unsized
        self.headers: dict[str, str] = {}  # what the caller's client_options send with every request (HTTP)
        self._generation = Generation(where, self._head) if pin else None

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> RemoteStore:
        """The store a parsed URL names (kinds http, gs, az; s3 when it is read unsigned)."""
        from obstore.exceptions import BaseError

        options = dict(spec.options)
        timeout = _timeout(spec, options)
        spec = dataclasses.replace(spec, options=options)
        try:
            if spec.kind == "http":
                store = cls(_http(spec, timeout[0]), spec.path, "http", timeout=timeout)
                store.headers = _http_headers(spec.options.get("client_options"))
                return store
            if spec.kind == "s3":
                endpoint = s3_endpoint(spec)
                credentials = None if spec.anonymous else obstore_credentials(spec, endpoint)
                if not spec.anonymous and credentials is None:
                    raise UsageError(f"s3://{spec.path}: botocore reads this signed store (stores/s3_signed_read.py)")
                attempts = READ_ATTEMPTS if credentials is None else read_attempts(READ_ATTEMPTS)
                store = cls(_s3(spec, timeout[0], credentials, attempts), f"s3://{spec.path}", "s3", pin=True,
                            timeout=timeout, signed=credentials is not None, attempts=attempts,
                            place=(endpoint, _s3_region(spec)))
                store.botocore_spec = None if spec.anonymous else spec
                return store
            if spec.kind == "gs":
                return cls(_gcs(spec, timeout[0]), f"gs://{spec.path}", "gs", timeout=timeout)
            if spec.kind == "az":
                return cls(_azure(spec, timeout[0]), spec.url.partition("#")[0], "az", timeout=timeout)
        except (BaseError, ValueError, TypeError) as exc:  # a config key obstore does not know, a bad value
            raise UsageError(f"{spec.url.partition('#')[0]}: {_first_line(exc)}") from exc
        raise UsageError(f"unknown storage kind {spec.kind!r}")

    # ---- reading ----------------------------------------------------------------------
    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        why = ""
        for _ in range(self._attempts):
            try:
                if self._unsized:
                    return _interruptible(lambda: self._get_unsized(key, limit))
                return _interruptible(lambda: self._get_once(key, limit))
            except FileNotFoundError as exc:
                if self.kind == "s3" and _NO_BUCKET in str(exc):  # S3's 404 for the bucket, not the object
                    raise self._fail(exc, f"get {key}") from exc
                if self._generation is not None:
                    self._generation.missing(key)
                return None
            except _CutShort as exc:
                why = str(exc)
            except NczarrError:
                raise  # ours already (over its limit): worded
            except Exception as exc:
                if self.kind == "http" and not self._unsized and _MISSING_LENGTH in str(exc):
                    self._unsized = True  # the server sends none (chunked or close-delimited): every later GET too
                    return _interruptible(lambda: self._get_unsized(key, limit))
                raise self._fail(exc, f"get {key}") from exc
        raise StoreUnavailableError(f"{self._at(key)}: the response was cut short ({why}) on each of "
                                    f"{self._attempts} attempts")

    def _get_once(self, key: str, limit: int | None) -> bytes:
        import obstore

        self._record("GetObject", key)
        result = obstore.get(self._store, self._name(key))
        size = result.meta["size"]
        if limit is not None and size > limit:
            raise limits.too_big(self._at(key), size, limit)
        pieces: list[Any] = []  # joined once at the end: no growing buffer copied again and again, then once more
        got = 0
        for piece in result.stream(min_chunk_size=PIECE if limit is None else min(PIECE, limit + 1)):
            pieces.append(piece)
            got += len(piece)
            if limit is not None and got > limit:
                raise limits.too_big(self._at(key), None, limit)
        if got < size:
            raise _CutShort(f"{got} of {size} bytes")
        if self._generation is not None:
            self._generation.seen(key, _response(result.meta))
        return b"".join(pieces)

    def _read_pieces(self, key: str, limit: int, consume: Callable[[Any], None], whole: bool = False) -> bool:
        """The body handed on as it streams, :data:`PIECE` bytes at a time, on the thread that waits for it
        (:func:`_interruptible`): a chunk inflated as it arrives never sits whole in memory, compressed or not.

        A failure before the first piece was handed on is left to :meth:`_get` (its retries, its words, a
        server that sends no size); one after that is :class:`RestartRead`: the caller reads the object whole.
        What ``consume`` raises is raised as it is."""
        if self._unsized or whole:
            return super()._read_pieces(key, limit, consume)
        handed: list[bool] = []
        refused: list[BaseException] = []

        def streamed() -> None:
            import obstore

            self._record("GetObject", key)
            result = obstore.get(self._store, self._name(key))
            size = result.meta["size"]
            if size > limit:
                raise limits.too_big(self._at(key), size, limit)
            got = 0
            for piece in result.stream(min_chunk_size=min(PIECE, limit + 1)):
                got += len(piece)
                if got > limit:
                    raise limits.too_big(self._at(key), None, limit)
                handed.append(True)
                try:
                    consume(piece)
                except BaseException as exc:
                    refused.append(exc)
                    raise
                del piece  # the next piece is fetched while this one is already let go
            if got < size:
                raise _CutShort(f"{got} of {size} bytes")
            if self._generation is not None:
                self._generation.seen(key, _response(result.meta))

        try:
            _interruptible(streamed)
        except Exception as exc:
            if refused and exc is refused[0]:
                raise
            if isinstance(exc, FileNotFoundError) and not (self.kind == "s3" and _NO_BUCKET in str(exc)):
                if self._generation is not None:
                    self._generation.missing(key)
                return False
            if isinstance(exc, NczarrError):
                raise
            if handed:
                raise RestartRead(f"{self._at(key)}: {exc}") from exc
            return super()._read_pieces(key, limit, consume)  # _get: its retries and its words
        return True

    def _get_unsized(self, key: str, limit: int | None) -> bytes:
        """One GET of a web server that declares no size (obstore refuses a body without ``Content-Length``).

        The standard library's client reads it piece by piece, refused as soon as it passes ``limit`` (the
        caller's declared-size bound: there is no header to refuse it by first), and the whole request is
        held to the store's timeout. A 404 is FileNotFoundError (absent), as obstore's is.
        """
        import http.client
        import time
        import urllib.error
        import urllib.request

        url = f"{self.where.rstrip('/')}/{quote(self._name(key))}"
        seconds, source = self._timeout
        deadline = time.monotonic() + seconds
        try:
            request = urllib.request.Request(url, headers=self.headers)  # the client_options obstore would send
            with urllib.request.urlopen(request, timeout=seconds) as response:  # an http(s) URL: the http kind only
                body = bytearray()
                while piece := response.read(PIECE if limit is None else min(PIECE, limit + 1)):
                    body += piece
                    if limit is not None and len(body) > limit:
                        raise limits.too_big(self._at(key), None, limit)
                    if time.monotonic() > deadline:
                        raise TimeoutError("operation timed out")
                return bytes(body)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise FileNotFoundError(key) from None
            reason = f"HTTP {exc.code} {exc.reason}".rstrip()
            error = StoreUnavailableError if exc.code >= 500 else StoreError
            raise error(f"{self.where}: {reason} while trying to get {key}") from None
        except (http.client.IncompleteRead, OSError) as exc:  # URLError and TimeoutError are OSErrors
            if isinstance(exc, TimeoutError) or "timed out" in str(exc):
                raise StoreUnavailableError(f"{self.where}: no complete answer within {seconds:g} s ({source}) "
                                            f"while trying to get {key}") from None
            if isinstance(exc, urllib.error.URLError):
                raise StoreUnavailableError(f"{self.where}: could not get {key} ({exc.reason})") from None
            raise _CutShort(f"{type(exc).__name__}: {exc}") from None

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        """S3: one ranged GET, never more than ``length`` bytes held; the object's size from the answer.
        Other kinds read the object whole, under the in-memory budget (the base's default): a web server
        need not serve ranges."""
        if self.kind != "s3":
            return super()._get_range(key, start, length)
        if length == 0:
            head = self._head(key)
            return None if head is None else (b"", int(head.get("ContentLength") or 0))
        import obstore

        wanted: GetOptions = {"range": {"suffix": -start}} if start < 0 else {"range": {"offset": start}}

        def ranged() -> tuple[bytes, int]:
            self._record("GetObject", key)
            result = obstore.get(self._store, self._name(key), options=wanted)
            size = int(result.meta["size"])
            _, count = resolve_range(size, start, length)
            body = bytearray()
            for piece in result.stream(min_chunk_size=min(PIECE, count + 1)):
                body += piece
                if len(body) >= count:
                    break  # the rest of the object is not read: a range holds at most ``length`` bytes
            if len(body) < count:
                raise _CutShort(f"{len(body)} of {count} bytes")
            return bytes(body[:count]), size

        try:
            return _interruptible(ranged)
        except FileNotFoundError as exc:
            if _NO_BUCKET in str(exc):
                raise self._fail(exc, f"get {key}") from exc
            return None
        except _CutShort as exc:
            raise StoreError(f"{self._at(key)}: range from {start} cut short ({exc})") from exc
        except Exception as exc:
            if "416" in str(exc) or "Range Not Satisfiable" in str(exc) or "InvalidRange" in str(exc):
                head = self._head(key)  # past the end (or an empty object)
                return None if head is None else (b"", int(head.get("ContentLength") or 0))
            raise self._fail(exc, f"get {key} (from byte {start})") from exc

    def _head(self, key: str) -> Mapping[str, Any] | None:
        import obstore

        self._record("HeadObject", key)
        try:
            return _response(_interruptible(lambda: obstore.head(self._store, self._name(key))))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._fail(exc, f"head {key}") from exc

    def why_no_dataset(self) -> str | None:
        """Plain HTTP: what the server answers for the URL itself. A 404 there is the status, as such (every
        root object answered 404 too); a zip file (its first bytes, whatever its name) is what it is: HTTP reads
        a store's objects one URL each, not a zip's members. S3, GCS, Azure: None (a prefix is no object)."""
        import obstore

        if self.kind != "http":
            return None
        try:
            _interruptible(lambda: obstore.head(self._store, ""))
        except FileNotFoundError:
            return "HTTP 404 Not Found at this URL"
        except Exception as exc:
            return str(self._fail(exc, "head the URL")).removeprefix(f"{self.where}: ")
        if self._starts_with(b"PK\x03\x04"):
            return ("a zip file served over HTTP, not a store: HTTP reads a store as one URL per object, never "
                    "a zip's members; download the zip and read the local copy, or serve its unzipped directory")
        return "/.zgroup, /.zarray (Zarr v2) and /zarr.json (Zarr v3) each answered HTTP 404 Not Found"

    def _starts_with(self, magic: bytes) -> bool:
        """Whether the URL's body starts with ``magic``: its first piece only, then the response is dropped."""
        import obstore

        def first() -> bool:
            for piece in obstore.get(self._store, "").stream(min_chunk_size=len(magic)):
                return bytes(piece[:len(magic)]) == magic
            return False

        try:
            return _interruptible(first)
        except Exception:  # a sniff: a failure here is no answer, never the error the caller reports
            return False

    def metadata_read(self) -> None:
        if self._generation is not None:
            self._generation.settle()

    def pin(self) -> Pin | None:
        """S3: the endpoint, the region and the root pinned at open, in the form the botocore store gives
        (stores/s3.py), so a worker reopening the URL with either is held to the dataset opened here."""
        if self._generation is None:
            return None
        return "s3", self._place[0], self._place[1], self._generation.pinned()

    def hold_to(self, pin: Pin | None) -> None:
        """Take over another process's S3 pin before reading anything (s3_generation.py's rules)."""
        if pin is None:
            return
        if self._generation is None or self.reads or len(pin) != 4 or pin[0] != "s3":
            raise StoreError(f"{self!r}: cannot be held to {pin[0]!r} pinned by another process")
        pinned = cast(Pinned | None, pin[3])
        if pinned is not None:
            self._generation.restore(pinned)

    def _record(self, operation: str, key: str) -> None:
        """One S3 request, named by its operation and its bucket key (list.append: safe across threads)."""
        if self.kind == "s3":
            name = self._name(key)
            self.requests.append((operation, f"{self._bucket_prefix}/{name}" if self._bucket_prefix else name))

    # ---- listing ----------------------------------------------------------------------
    def _list_prefix(self, prefix: str) -> Iterator[str]:
        if self.kind == "http":
            yield from self._index(prefix)
            return
        import obstore

        name = self._name(prefix).rstrip("/")
        self._record("ListObjectsV2", prefix)
        found: list[str] = []
        try:
            pages = obstore.list(self._store, name or None)
            while (page := _interruptible(lambda: next(pages, None))) is not None:
                found += [keys.join(meta["path"]) for meta in page]
        except Exception as exc:
            if self.botocore_spec is None or "invalid path" not in str(exc):
                raise self._fail(exc, f"list {prefix}") from exc
            # obstore refuses to list a key with a ".." segment at all; botocore lists it, and the caller refuses
            # that key by name (nczarr-check's NCZ-STORE-UNSAFE), as on the botocore reader
            from nczarr_conformance.stores.s3 import S3Store

            with S3Store.from_spec(self.botocore_spec) as listing:
                found = list(listing._list_prefix(prefix))
        yield from found

    def _index(self, prefix: str) -> Iterator[str]:
        """Every object below ``prefix`` from the server's directory index pages, depth first."""
        pending = [self._name(prefix).strip("/")]
        seen: set[str] = set()
        while pending:
            folder = pending.pop()
            if folder in seen:
                continue
            seen.add(folder)
            page = self._get(f"{folder}/" if folder else "/", limits.max_metadata_bytes())
            if page is None:
                raise StoreError(f"{self.where}/{folder}: the server gives no directory index to list; "
                                 "serve the store with one (nginx autoindex, python -m http.server) or read a copy")
            base = f"{self.where}/{folder}/" if folder else f"{self.where}/"
            for link in _links(page.decode("utf-8", "replace")):
                target = urljoin(base, link)
                if not target.startswith(base) or target == base:
                    continue  # the parent, the server's other pages, sort links
                rel = unquote(urlsplit(target).path[len(urlsplit(base).path):])
                if rel.endswith("/"):
                    pending.append(f"{folder}/{rel.rstrip('/')}".strip("/"))
                elif rel and "/" not in rel:
                    yield keys.join(f"{folder}/{rel}".strip("/"))

    # ---- not for writing ----------------------------------------------------------------
    def _put(self, key: str, data: bytes) -> None:
        raise StoreError(f"{self!r} is read-only")

    def _delete(self, key: str) -> None:
        raise StoreError(f"{self!r} is read-only")

    # ---- helpers ------------------------------------------------------------------------
    def _name(self, key: str) -> str:
        return key.lstrip("/")

    def _at(self, key: str) -> str:
        return f"{self.where}/{self._name(key)}"

    def _fail(self, exc: Exception, what: str) -> StoreError:
        """One line for a library error: the status and its reason, never the body the server sent."""
        from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

        text = str(exc)
        if "kind: Timeout" in text or "operation timed out" in text.lower():
            seconds, source = self._timeout
            return StoreUnavailableError(f"{self.where}: no complete answer within {seconds:g} s ({source}) while "
                                         f"trying to {what}")
        match = _STATUS.search(text)
        status = int(match.group(1)) if match else None
        reason = f"HTTP {status}{match.group(2).rstrip()}" if match else _first_line(exc)
        code = _S3_CODE.search(text) if self.kind == "s3" else None
        if code is not None:  # S3's own error code, as the botocore reader words it (SlowDown, AccessDenied, …)
            reason = code.group(1)
        if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)) or status in (401, 403):
            hint = ""
            if self.kind == "http" and ("x-amz-request-id" in text.lower() or "<Error><Code>" in text):
                hint = "; the server answers as S3: add s3 to the mode (#mode=nczarr,s3) to sign with credentials"
            elif self.kind == "s3" and not self.signed:
                hint = "; the request was unsigned and the bucket is not public: drop aws.profile=no / --anon to sign"
            return StoreError(f"{self.where}: access denied ({reason}) while trying to {what}{hint}")
        if self.kind == "s3" and _NO_BUCKET in text:
            return StoreError(f"{self.where}: no such bucket {self.where.removeprefix('s3://').partition('/')[0]!r}")
        if status is None or status >= 500:
            if self.kind == "s3":  # the botocore reader's words (stores/s3.py), whichever client read
                return StoreUnavailableError(f"{self.where}: {reason} while trying to {what} (gave up after "
                                             f"{self._attempts} attempts)")
            return StoreUnavailableError(f"{self.where}: could not {what} ({reason}) after {self._attempts} attempts")
        return StoreError(f"{self.where}: {reason} while trying to {what}")

    def __repr__(self) -> str:
        return f"RemoteStore({self.where!r})"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _response(meta: Mapping[str, Any]) -> dict[str, Any]:
    """obstore's object metadata as s3_generation.py reads a boto3 response (no server clock)."""
    return {"ETag": meta.get("e_tag"), "LastModified": meta.get("last_modified"), "VersionId": meta.get("version"),
            "ContentLength": meta.get("size")}


def _links(page: str) -> list[str]:
    """The ``href`` of every ``<a>`` of a directory listing page, less queries and fragments (a server's sort
    links). html.parser is imported here: a read that lists nothing need not pay for it."""
    import html.parser

    hrefs: list[str] = []

    class Links(html.parser.HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                hrefs.extend(v for k, v in attrs if k == "href" and v and "?" not in v and "#" not in v)

    parser = Links()
    parser.feed(page)
    return hrefs


def _options(spec: StoreSpec, allowed_anon: bool = True) -> dict[str, Any]:
    """``storage_options`` in obstore's names (fsspec's accepted too); ``anon`` becomes skip_signature."""
    out: dict[str, Any] = {}
    for name, value in spec.options.items():
        if name == "anon":
            continue
        if name == "client_kwargs" and isinstance(value, Mapping):  # s3fs's {"endpoint_url": ..., "region_name": ...}
            out.update({_ALIASES.get(str(k), str(k)): v for k, v in value.items()})
            continue
        out[_ALIASES.get(name, name)] = value
    if spec.anonymous and allowed_anon:
        out["skip_signature"] = True
    return out


def _http_headers(client_options: Any) -> dict[str, str]:
    """The headers ``client_options`` make obstore send (``default_headers``, ``user_agent``), for the requests
    a web server without Content-Length gets from the standard library's client instead."""
    if not isinstance(client_options, Mapping):
        return {}
    headers = {str(k): str(v) for k, v in dict(client_options.get("default_headers") or {}).items()}
    if client_options.get("user_agent"):
        headers["User-Agent"] = str(client_options["user_agent"])
    return headers


def _http(spec: StoreSpec, timeout: float = DEFAULT_TIMEOUT) -> ObjectStore:
    from obstore.store import HTTPStore

    options = dict(spec.options)
    options.pop("anon", None)  # a web server is read without credentials anyway
    client = _client(spec.path, options.pop("client_options", None), timeout)
    if options:
        raise UsageError(f"{spec.url}: storage option(s) {', '.join(sorted(options))} mean nothing to a plain HTTP "
                         "store (it takes client_options)")
    return HTTPStore.from_url(spec.path, client_options=client, retry_config=_retry())


def _s3(spec: StoreSpec, timeout: float = DEFAULT_TIMEOUT, credentials: Mapping[str, str] | None = None,
        attempts: int = READ_ATTEMPTS) -> ObjectStore:
    """obstore's S3 store: unsigned (``credentials`` None, ``anon``), or signed with ``credentials``
    (stores/s3_signed_read.py's, taken from the environment; nothing else is looked up)."""
    from obstore.store import S3Store

    bucket, _, prefix = spec.path.partition("/")
    options = _options(spec)
    endpoint = s3_endpoint(spec)
    options.pop("endpoint", None)
    options.pop("region", None)
    region = _s3_region(spec)
    client = _client(endpoint, options.pop("client_options", None), timeout)
    if credentials is not None:
        options.update(credentials)
    return S3Store(bucket, prefix=prefix or None, endpoint=endpoint, region=region, client_options=client,
                   retry_config=_retry(attempts), **options)


def _s3_region(spec: StoreSpec) -> str:
    return region_of(spec) or "us-east-1"


def s3_endpoint(spec: StoreSpec) -> str | None:
    """The storage option's endpoint, else the URL's own host (not AWS's: obstore finds the regional one),
    else ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` as botocore does."""
    option = _options(spec, allowed_anon=False).get("endpoint")
    if option:
        endpoint = str(option)
        return None if (urlsplit(endpoint).hostname or "").endswith("amazonaws.com") else endpoint
    if spec.endpoint and not (urlsplit(spec.endpoint).hostname or "").endswith("amazonaws.com"):
        return spec.endpoint
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _gcs(spec: StoreSpec, timeout: float = DEFAULT_TIMEOUT) -> ObjectStore:
    from obstore.store import GCSStore

    bucket, _, prefix = spec.path.partition("/")
    options = _options(spec)
    client = _client(options.get("base_url"), options.pop("client_options", None), timeout)
    return GCSStore(bucket, prefix=prefix or None, client_options=client, retry_config=_retry(), **options)


def _azure(spec: StoreSpec, timeout: float = DEFAULT_TIMEOUT) -> ObjectStore:
    from obstore.store import AzureStore

    options = _options(spec)
    client = _client(options.get("endpoint"), options.pop("client_options", None), timeout)
    return AzureStore.from_url(spec.url.partition("#")[0], client_options=client, retry_config=_retry(), **options)
