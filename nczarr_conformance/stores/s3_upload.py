"""Concurrent uploads for the S3 store: a bounded pool, a byte budget, multipart for big objects.

Why a pool of its own: the writer's threads read and encode chunks (disk and CPU work),
an upload waits on the network. Handing each object to this pool lets a couple of
encoders keep many PUTs in flight, and the byte budget keeps memory flat: ``submit``
blocks while the objects queued or uploading hold more than ``in_flight_bytes`` (an
object bigger than the budget goes up alone).

An object of ``multipart_threshold`` bytes or more goes up as a multipart upload whose
parts are uploaded in parallel by the same pool, each from a ``memoryview`` slice of the
object; the last part to finish completes the upload, a failed one aborts it. Retries
(throttling, 5xx, dropped connections) are botocore's, per request, as configured on the
client (see s3.py): exponential backoff with jitter.

The first failure is kept and raised by the next ``submit`` and by ``drain``; work still
queued is then skipped. ``cancel`` drops queued work, waits for the requests in flight
and aborts the multipart uploads left open, so that afterwards nothing can still land
in the bucket (an abort deletes what was put only once that holds).
"""
from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nczarr_conformance import safety

#: (object name, the exception a request raised) → the exception to report
ErrorMapper = Callable[[str, Exception], Exception]


class _View(io.RawIOBase):
    """A read-only, seekable file over a slice of an object: a part's body without a copy."""

    def __init__(self, data: memoryview) -> None:
        super().__init__()
        self._data = data
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._data)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else min(len(self._data), self._pos + size)
        out = bytes(self._data[self._pos:end]) if end > self._pos else b""
        self._pos = max(self._pos, end)
        return out

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)


class _Multipart:
    """One multipart upload: its parts' ETags as they come, the first error."""

    def __init__(self, name: str, upload_id: str, size: int, parts: int) -> None:
        self.name, self.upload_id, self.size = name, upload_id, size
        self.left = parts
        self.parts: dict[int, dict[str, Any]] = {}
        self.error: Exception | None = None
        self.lock = threading.Lock()

    def record(self, number: int, part: dict[str, Any] | None, error: Exception | None) -> bool:
        """Note one part's outcome; True for the last part to report."""
        with self.lock:
            if part is not None:
                self.parts[number] = part
            if error is not None and self.error is None:
                self.error = error
            self.left -= 1
            return self.left == 0


class Uploader:
    """PUTs to one bucket from ``concurrency`` threads, at most ``in_flight_bytes`` held at once."""

    def __init__(self, client: Any, bucket: str, mapper: ErrorMapper, *, concurrency: int, in_flight_bytes: int,
                 multipart_threshold: int, part_size: int) -> None:
        self.client = client
        self.bucket = bucket
        self.mapper = mapper
        self.budget = max(1, in_flight_bytes)
        self.threshold = multipart_threshold
        self.part_size = part_size
        self._pool = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="s3-upload")
        self._cond = threading.Condition()
        self._bytes = 0  # bytes of the objects submitted and not finished
        self._objects = 0
        self._error: Exception | None = None
        self._open: dict[str, str] = {}  # multipart uploads neither completed nor aborted: id → name
        # what botocore does by default since 1.36 (and s3transfer with it): CRC32 on every part
        self._checksum = getattr(client.meta.config, "request_checksum_calculation", None) == "when_supported"

    # ---- the caller's side ------------------------------------------------------------------
    def submit(self, name: str, data: bytes, *, interruptible: bool = True) -> None:
        """Queue one object; blocks while the budget is spent, raises the first failure so far.

        ``interruptible``: a signal received meanwhile raises (not in a commit's critical section).
        """
        size = len(data)
        with self._cond:
            while self._error is None and self._objects and self._bytes + size > self.budget:
                self._cond.wait(0.2)
                if interruptible:
                    safety.raise_if_interrupted()
            if self._error is not None:
                raise self._error
            self._bytes += size
            self._objects += 1
        task = self._multipart if size >= self.threshold else self._put
        try:
            self._pool.submit(task, name, data)
        except RuntimeError as exc:  # cancelled meanwhile
            self._finish(size, None)
            raise self.mapper(name, exc) from exc

    def drain(self, *, interruptible: bool = True) -> None:
        """Wait for every object submitted; raise the first failure."""
        with self._cond:
            while self._objects and self._error is None:
                self._cond.wait(0.2)
                if interruptible:
                    safety.raise_if_interrupted()
            if self._error is not None:
                raise self._error

    def cancel(self) -> None:
        """Drop queued work, wait for requests in flight, abort multipart uploads left open."""
        with self._cond:
            if self._error is None:  # queued tasks that still start skip; a late submit raises
                self._error = self.mapper("", RuntimeError("uploads cancelled"))
        self._pool.shutdown(wait=True, cancel_futures=True)
        for upload_id, name in list(self._open.items()):
            self._abort(name, upload_id)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    # ---- the pool's side ----------------------------------------------------------------------
    def _finish(self, size: int, error: Exception | None) -> None:
        with self._cond:
            self._bytes -= size
            self._objects -= 1
            if error is not None and self._error is None:
                self._error = error
            self._cond.notify_all()

    def _failed(self) -> bool:
        return self._error is not None

    def _put(self, name: str, data: bytes) -> None:
        error: Exception | None = None
        try:
            if not self._failed():
                self.client.put_object(Bucket=self.bucket, Key=name, Body=data)
        except Exception as exc:
            error = self.mapper(name, exc)
        self._finish(len(data), error)

    def _multipart(self, name: str, data: bytes) -> None:
        if self._failed():
            self._finish(len(data), None)
            return
        extra = {"ChecksumAlgorithm": "CRC32"} if self._checksum else {}
        try:
            upload_id = str(self.client.create_multipart_upload(Bucket=self.bucket, Key=name, **extra)["UploadId"])
        except Exception as exc:
            self._finish(len(data), self.mapper(name, exc))
            return
        with self._cond:
            self._open[upload_id] = name
        view = memoryview(data)
        offsets = range(0, len(data), self.part_size)
        state = _Multipart(name, upload_id, len(data), len(offsets))
        for number, offset in enumerate(offsets, 1):
            try:
                self._pool.submit(self._part, state, number, view[offset:offset + self.part_size])
            except RuntimeError:  # cancelled meanwhile: cancel() aborts the open upload
                return

    def _part(self, state: _Multipart, number: int, body: memoryview) -> None:
        part: dict[str, Any] | None = None
        error: Exception | None = None
        try:
            if not self._failed() and state.error is None:
                extra = {"ChecksumAlgorithm": "CRC32"} if self._checksum else {}
                response = self.client.upload_part(Bucket=self.bucket, Key=state.name, UploadId=state.upload_id,
                                                   PartNumber=number, Body=_View(body), **extra)
                part = {"ETag": response["ETag"], "PartNumber": number}
                if "ChecksumCRC32" in response:
                    part["ChecksumCRC32"] = response["ChecksumCRC32"]
        except Exception as exc:
            error = self.mapper(state.name, exc)
        if state.record(number, part, error):
            self._complete(state)

    def _complete(self, state: _Multipart) -> None:
        error = state.error
        if error is None and len(state.parts) == len(range(0, state.size, self.part_size)):
            try:
                self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=state.name, UploadId=state.upload_id,
                    MultipartUpload={"Parts": [state.parts[n] for n in sorted(state.parts)]})
                with self._cond:
                    self._open.pop(state.upload_id, None)
                self._finish(state.size, None)
                return
            except Exception as exc:
                error = self.mapper(state.name, exc)
        self._abort(state.name, state.upload_id)
        self._finish(state.size, error)

    def _abort(self, name: str, upload_id: str) -> None:
        with contextlib.suppress(Exception):  # best effort: the write's own error is the one worth reporting
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=name, UploadId=upload_id)
        with self._cond:
            self._open.pop(upload_id, None)
