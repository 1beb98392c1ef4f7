"""Long-lived reader workers (a command peer's ``serve``, the GDAL peer's bindings): one process answers
many reads, one JSON request line in, one reply line out, instead of a process started per store.

The protocol is the one docs/plugins.md gives for ``serve`` (serve protocol 2): a request is one JSON
object a line on the worker's stdin, carrying an ``"id"``; the reply is one JSON object a line on its stdout
carrying that ``"id"``: ``{"id": ID, "stdout": TEXT}`` (what the one-shot reader prints; an optional
``"stderr"``), or ``{"id": ID, "exit": N, "stderr": TEXT}`` where it would exit N with TEXT on stderr. What
the worker writes on its own stderr while it answers is that read's stderr too (its last
:data:`STDERR_TAIL` bytes).

The id is what keeps a reply on its read: a stray line on a worker's stdout (a library printing there, a
reply from a worker that answered twice) used to be taken for the next read's answer, and every later read
was graded against the store before it (issue 39). A line that is not this request's reply, a reply longer
than :data:`REPLY_LIMIT` or a reply without an id (protocol 1's) fails that one read with
:class:`WorkerProtocolError`, and the worker is replaced, so the next read starts clean.

A pool keeps one worker per read in flight (so reads in parallel threads never share one) and hands an
idle one to the next read; a worker that dies or outlasts the read's timeout is killed with everything it
started (its session), that read is answered as a one-shot reader's death or timeout would be, and the next
read starts a new worker. Workers end with ``close()`` or at interpreter exit.
"""
from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import queue
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: the longest reply line a worker may give (the model JSON of a read): past it, that read fails
REPLY_LIMIT = 64 * 1024**2
#: how much of a worker's or a command's stderr a read keeps: its end, where a traceback says what broke
STDERR_TAIL = 64 * 1024
#: the request ids, unique in this process, so that no reply can pass for another read's
_IDS = itertools.count(1)


class WorkerProtocolError(Exception):
    """A worker's reply that is not its answer to the request: wrong or no id, not JSON, too long. The
    worker was replaced; ``stderr`` is what it wrote on its stderr meanwhile (its end)."""

    def __init__(self, message: str, stderr: bytes = b"") -> None:
        super().__init__(message)
        self.stderr = stderr


class LineTooLong(Exception):
    """A line longer than the limit it was read with: what was read of it is dropped."""


class LineReader:
    """Lines from a pipe, each waited for at most a timeout. It reads the file descriptor itself: a Python
    file object's ``readline`` may take several lines into its own buffer, where ``select`` on the descriptor
    no longer sees them, and the next wait would then last until its timeout with the answer already read
    (the reads that "timed out after 120 s" and the fork servers that "stopped" in issue #26's reports)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = b""

    def line(self, timeout: float, limit: int | None = None) -> bytes | None:
        """The next line without its newline; None on timeout, b"" at end of output (the writer is gone).
        LineTooLong past ``limit`` bytes without a newline (memory stays bounded by it)."""
        deadline = time.monotonic() + timeout
        parts, size, tail = [self.pending], len(self.pending), self.pending
        while b"\n" not in tail:
            if limit is not None and size > limit:
                self.pending = b""
                raise LineTooLong(f"a line longer than {limit} bytes")
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                self.pending = b"".join(parts)
                return None
            tail = os.read(self.fd, 1 << 20)
            if not tail:
                self.pending = b"".join(parts)
                return b""
            parts.append(tail)
            size += len(tail)
        self.pending = b"".join(parts)
        line, _, self.pending = self.pending.partition(b"\n")
        if limit is not None and len(line) > limit:
            raise LineTooLong(f"a line longer than {limit} bytes")
        return line


class _Worker:
    """One worker process: a request line in, a reply line out. Its stderr goes to a file, so that a
    reply's detail is what the worker said while it answered."""

    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: Path | None) -> None:
        self.errors = tempfile.TemporaryFile(prefix="ncz-serve-")  # noqa: SIM115 (lives as the worker does)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                                     env=dict(env), cwd=cwd, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.replies = self.proc.stdin, LineReader(self.proc.stdout.fileno())
        self.said = 0
        _LIVE.append(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _stderr(self) -> bytes:
        """What the worker wrote on stderr since the last call: its last :data:`STDERR_TAIL` bytes."""
        end = self.errors.seek(0, os.SEEK_END)
        self.errors.seek(max(self.said, end - STDERR_TAIL))
        text = self.errors.read(STDERR_TAIL)
        self.said = end
        return text

    def _refuse(self, message: str) -> WorkerProtocolError:
        """The read fails with ``message`` and the worker goes: a worker out of step answers no more reads."""
        self._stop()
        err = self._stderr()
        self.close()
        return WorkerProtocolError(message, err)

    def call(self, request: Mapping[str, str], timeout: float) -> tuple[int | None, bytes, bytes]:
        """(exit status the reader would have, or None on timeout; its stdout; its stderr) for ``request``.
        WorkerProtocolError: the worker's line is not its reply to this request (see the module docstring)."""
        ident = next(_IDS)
        try:
            self.stdin.write((json.dumps({**request, "id": ident}) + "\n").encode())
            self.stdin.flush()
            line = self.replies.line(timeout, REPLY_LIMIT)
        except OSError:  # its stdin is closed: it died before reading the request
            line = b""
        except LineTooLong:
            raise self._refuse(f"the serve worker's reply is longer than {REPLY_LIMIT // 1024**2} MiB") from None
        if not line:
            timed_out = line is None
            self._stop()
            status, err = self.proc.returncode, self._stderr()
            self.close()
            if timed_out:
                return None, b"", err
            # a worker that ends cleanly without answering is no answer at all
            return (status if status else 1), b"", err or b"the serve worker ended without a reply\n"
        doc = _reply(line)
        if doc is None:
            shown = line[:80].decode("utf-8", "replace")
            raise self._refuse(f"the serve worker wrote a line that is not a reply ({shown!r}): "
                               "a stray line on its stdout?")
        if "id" not in doc:
            raise self._refuse('the serve worker replied without the request\'s "id": since serve protocol 2 '
                               'each reply echoes it, {"id": …, "stdout": …} (docs/plugins.md)')
        if doc["id"] != ident:
            raise self._refuse(f"the serve worker replied to request {doc['id']!r}, not to this one ({ident}): "
                               "a stray line on its stdout?")
        said = str(doc.get("stderr") or "").encode()[-STDERR_TAIL:]
        if "exit" in doc:
            status = doc["exit"]
            return (status if isinstance(status, int) and status else 1), b"", self._stderr() + said
        if not isinstance(doc.get("stdout"), str):
            raise self._refuse('the serve worker\'s reply has neither "stdout" (a text) nor "exit" '
                               "(docs/plugins.md)")
        return 0, str(doc["stdout"]).encode(), self._stderr() + said

    def _stop(self) -> None:
        """Kill the worker and what it started (its session), and reap it."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        self._stop()
        for stream in (self.stdin, self.proc.stdout, self.errors):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        with contextlib.suppress(ValueError):
            _LIVE.remove(self)


def _reply(line: bytes) -> dict[str, Any] | None:
    """The reply object a line holds, or None where it holds none."""
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


class WorkerPool:
    """The workers of one command (``argv``), started in ``cwd`` with the environment ``environment()``
    gives when each starts: one per call in flight, kept for the next call, replaced when one dies."""

    def __init__(self, argv: list[str], environment: Callable[[], Mapping[str, str]], cwd: Path | None) -> None:
        self.argv = list(argv)
        self.environment = environment
        self.cwd = cwd
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()

    def call(self, request: Mapping[str, str], timeout: float) -> tuple[int | None, bytes, bytes]:
        """(exit status, or None on timeout; stdout; stderr) the one-shot reader would give for ``request``.
        OSError: the worker cannot start (its program is missing); WorkerProtocolError: its reply was not
        this request's (the worker is replaced)."""
        try:
            worker: _Worker | None = self._idle.get_nowait()
        except queue.Empty:
            worker = None
        if worker is None or not worker.alive():
            if worker is not None:
                worker.close()
            worker = _Worker(self.argv, self.environment(), self.cwd)
        answer = worker.call(request, timeout)
        if worker.alive():
            self._idle.put(worker)
        else:
            worker.close()
        return answer

    def close(self) -> None:
        """End every idle worker; a later call starts a new one."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


_LIVE: list[_Worker] = []


@atexit.register
def _close_workers() -> None:
    for worker in list(_LIVE):
        worker.close()
