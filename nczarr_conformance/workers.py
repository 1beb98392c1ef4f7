"""Long-lived reader workers (a command peer's ``serve``, the GDAL peer's bindings): one process answers
many reads, one JSON request line in, one reply line out, instead of a process started per store.

The protocol is the one docs/plugins.md gives for ``serve``: a request is one JSON object a line on the
worker's stdin; the reply is one line on its stdout, in order, either what the one-shot reader prints, or
``{"exit": N, "stderr": TEXT}`` where it would exit N with TEXT on stderr. What the worker writes on its
own stderr while it answers is that read's stderr too.

A pool keeps one worker per read in flight (so reads in parallel threads never share one) and hands an
idle one to the next read; a worker that dies or outlasts the read's timeout is killed with everything it
started (its session), that read is answered as a one-shot reader's death or timeout would be, and the next
read starts a new worker. Workers end with ``close()`` or at interpreter exit.
"""
from __future__ import annotations

import atexit
import contextlib
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


class LineReader:
    """Lines from a pipe, each waited for at most a timeout. It reads the file descriptor itself: a Python
    file object's ``readline`` may take several lines into its own buffer, where ``select`` on the descriptor
    no longer sees them, and the next wait would then last until its timeout with the answer already read
    (the reads that "timed out after 120 s" and the fork servers that "stopped" in issue #26's reports)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = b""

    def line(self, timeout: float) -> bytes | None:
        """The next line without its newline; None on timeout, b"" at end of output (the writer is gone)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return b""
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
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
        """What the worker wrote on stderr since the last call."""
        self.errors.seek(self.said)
        text = self.errors.read()
        self.said += len(text)
        return text

    def call(self, request: Mapping[str, str], timeout: float) -> tuple[int | None, bytes, bytes]:
        """(exit status the reader would have, or None on timeout; its stdout; its stderr) for ``request``."""
        try:
            self.stdin.write((json.dumps(dict(request)) + "\n").encode())
            self.stdin.flush()
            line = self.replies.line(timeout)
        except OSError:  # its stdin is closed: it died before reading the request
            line = b""
        if not line:
            timed_out = line is None
            self._stop()
            status, err = self.proc.returncode, self._stderr()
            self.close()
            if timed_out:
                return None, b"", err
            # a worker that ends cleanly without answering is no answer at all
            return (status if status else 1), b"", err or b"the serve worker ended without a reply\n"
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "exit" in doc and "model" not in doc:
            status = doc.get("exit")
            said = str(doc.get("stderr", "")).encode()
            return (status if isinstance(status, int) and status else 1), b"", self._stderr() + said
        return 0, line, self._stderr()

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
        OSError: the worker cannot start (its program is missing)."""
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
