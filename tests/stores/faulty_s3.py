"""A real HTTP server in front of moto that answers chosen requests with S3 errors.

moto 5 has no fault injection for S3, so throttling, 5xx and truncated bodies are injected
here, on the wire: the client under test speaks HTTP to this proxy exactly as it would to
S3, the proxy forwards every request it does not fail to the moto server and relays the
answer. A truncating fault (``truncate``) relays the real answer's headers, Content-Length
included, then only part of its body, and closes the connection: what a reset mid-body
looks like to a client.
It also records what went by (method, key, query, status) and how many requests were in
flight at once, so tests observe concurrency and multipart uploads from the server side.
"""
from __future__ import annotations

import http.client
import http.server
import re
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

ERROR_BODY = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
              '<RequestId>faulty-s3</RequestId></Error>')
MESSAGES = {"SlowDown": "Please reduce your request rate.", "InternalError": "We encountered an internal error.",
            "AccessDenied": "Access Denied", "ServiceUnavailable": "Service is unable to handle request."}
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "expect"}


@dataclass
class Fault:
    """Answer ``status``/``code`` to the first ``times`` requests of each object matching ``method`` and ``key``.

    ``key`` is a regular expression searched in "bucket/key"; ``query`` one searched in the query
    string (``partNumber=`` for upload parts, ``uploads`` for CreateMultipartUpload). With
    ``truncate`` (a fraction in [0, 1)) the request is forwarded and only that share of the
    real body is sent (``status`` and ``code`` are then unused).
    """

    method: str
    key: str
    status: int = 503
    code: str = "SlowDown"
    times: int = 1
    query: str = ""
    truncate: float | None = None
    seen: dict[str, int] = field(default_factory=dict)

    def hits(self, method: str, key: str, query: str) -> bool:
        if method != self.method or not re.search(self.key, key) or not re.search(self.query, query):
            return False
        self.seen[key] = self.seen.get(key, 0) + 1
        return self.seen[key] <= self.times


class FaultyS3:
    """Serve on 127.0.0.1 (``url``), forward to ``upstream``; ``faults`` and ``delay`` are set by tests."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.faults: list[Fault] = []
        self.delay = 0.0  # seconds each forwarded request waits: makes overlap observable
        self.log: list[tuple[str, str, str, int]] = []  # method, bucket/key, query, status
        self.in_flight = 0  # requests
        self.max_in_flight = 0
        self.bytes_in_flight = 0  # request bodies
        self.max_bytes_in_flight = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                proxy.handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def requests(self, method: str | None = None, status: int | None = None) -> list[tuple[str, str, str, int]]:
        with self._lock:
            return [r for r in self.log if (method is None or r[0] == method) and (status is None or r[3] == status)]

    def handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        path, _, query = req.path.partition("?")
        key = path.lstrip("/")
        body = req.rfile.read(int(req.headers.get("Content-Length") or 0))
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.bytes_in_flight += len(body)
            self.max_bytes_in_flight = max(self.max_bytes_in_flight, self.bytes_in_flight)
            fault = next((f for f in self.faults if f.hits(req.command, key, query)), None)
        cut: int | None = None
        try:
            if fault is not None and fault.truncate is not None:
                status, headers, payload = self._forward(req, body)
                cut = int(len(payload) * fault.truncate)
            elif fault is not None:
                status, headers, payload = fault.status, [("Content-Type", "application/xml")], ERROR_BODY.format(
                    code=fault.code, message=MESSAGES.get(fault.code, fault.code)).encode()
            else:
                if self.delay:
                    time.sleep(self.delay)
                status, headers, payload = self._forward(req, body)
        finally:
            with self._lock:
                self.in_flight -= 1
                self.bytes_in_flight -= len(body)
                self.log.append((req.command, key, query, status))
        req.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP:
                req.send_header(name, value)
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        if req.command != "HEAD":
            req.wfile.write(payload if cut is None else payload[:cut])
        if cut is not None:
            req.wfile.flush()
            req.close_connection = True  # fewer bytes than Content-Length, then the connection drops

    def _forward(self, req: http.server.BaseHTTPRequestHandler,
                 body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            headers = {k: v for k, v in req.headers.items() if k.lower() not in _HOP}
            headers["Content-Length"] = str(len(body))
            conn.request(req.command, req.path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()
