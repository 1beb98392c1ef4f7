"""netcdf-c reads an S3 object's header through a loopback HTTP server answering from ranged S3 reads.

netCDF4-python reads the netCDF header (types, attributes, fill values) of the file references are made
from. For a file on S3 it is handed ``http://127.0.0.1:PORT/TOKEN#mode=bytes``: netcdf-c's byte-range
mode, which HEADs the URL for its size and GETs the ranges HDF5 asks for, nothing more. This server
answers them from :class:`~nczarr_conformance.stores.s3_object.S3Object` (signed, with our endpoint and
credentials, held to one ETag), so netcdf-c needs no S3 support of its own, and no presigned URL
(netcdf-c HEADs a URL S3 signed for GET only, which S3 refuses). It listens on 127.0.0.1 only, under a
random path, for as long as the ``with`` block lasts.
"""
from __future__ import annotations

import http.server
import os
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nczarr_conformance.errors import NczarrError
from nczarr_conformance.stores.s3_object import S3Object

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: netcdf-c sends its ranges on one connection
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return  # netcdf-c's requests are ours to answer, not to print

    def _refuse(self, status: int, why: str) -> None:
        body = why.encode("utf-8", "replace")
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, *, body: bool) -> None:
        if self.path.split("?")[0] != self.server.path:
            self._refuse(404, "not here")
            return
        obj = self.server.obj
        try:
            size = obj.stamp().size
            wanted = self.headers.get("Range")
            if wanted is None:
                start, end, status = 0, size, 200
            else:
                found = _RANGE.match(wanted.strip())
                if found is None:
                    self._refuse(416, "one bytes=START-END range only")
                    return
                start = int(found.group(1))
                end = min(size, int(found.group(2)) + 1) if found.group(2) else size
                if start >= size:
                    self._refuse(416, "past the end")
                    return
                status = 206
            data = obj.read(start, end - start) if body else b""
        except NczarrError as exc:  # the object changed or went away: netcdf-c sees an error, the caller the cause
            self.server.errors.append(exc)
            self._refuse(502, str(exc))
            return
        self.send_response(status)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if body:
            self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, obj: S3Object) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.obj = obj
        self.path = "/" + secrets.token_hex(16) + "/" + os.path.basename(obj.key)
        self.errors: list[NczarrError] = []


@contextmanager
def serving(obj: S3Object) -> Iterator[tuple[str, list[NczarrError]]]:
    """(the byte-range URL netcdf-c opens, the errors reading the object raised while answering it)."""
    server = _Server(obj)
    thread = threading.Thread(target=server.serve_forever, name="nczarr-http-bridge", daemon=True)
    thread.start()
    # a proxy in the environment (http_proxy) must not carry the loopback requests away: libcurl honours no_proxy
    saved = {k: os.environ.get(k) for k in ("no_proxy", "NO_PROXY")}
    for name, value in saved.items():
        os.environ[name] = ",".join(v for v in (value, "127.0.0.1") if v)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{server.path}#mode=bytes", server.errors
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.shutdown()
        server.server_close()
        thread.join()
