"""``gdalmdiminfo -detailed URL`` as a long-lived worker of GDAL's Python bindings, for the GDAL peer
(peers/gdal_peer.py): libgdal and its drivers are loaded once, then each store is one request, instead
of a gdalmdiminfo process per store (about 45 ms of process start each, 218 a report; issue #26).

It makes the tool's own library calls, of the one ``libgdal`` both link (Debian's python3-gdal and gdal-bin
are built from one source): ``GDALOpenEx`` as multidimensional with verbose errors, then
``GDALMultiDimInfo`` with ``-detailed``; a store that does not open is "gdalmdiminfo failed - unable to open
'URL'." with exit 1, as the tool's ``main`` says it. GDAL's messages during a read are formatted as the tool's
default handler prints them ("ERROR N: …", "Warning N: …", at most CPL_MAX_ERROR_REPORTS a read, then its
notice), counted from zero for each store as each tool process counts them.

Protocol (nczarr_conformance/workers.py, serve protocol 2): one request a line on stdin, ``{"id": ID,
"url": …}``; one reply a line on stdout, ``{"id": ID, "stdout": JSON_TEXT, "stderr": TEXT}`` for a store the
tool prints, ``{"id": ID, "exit": 1, "stderr": TEXT}`` where it exits 1. A crash of GDAL ends the worker, as it
would end the tool: the pool reads that as the tool's death.

Standalone on purpose (standard library and ``osgeo`` only): it runs under the interpreter that has the
bindings (Debian's ``/usr/bin/python3``), not ours; ``osgeo`` is imported when it runs, so the module imports
anywhere.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any


class _Messages:
    """What CPLDefaultErrorHandler would have printed for one read (it writes to the tool's stderr)."""

    def __init__(self, gdal: Any, limit: int) -> None:
        self.gdal, self.limit = gdal, limit
        self.lines: list[str] = []
        self.count = 0

    def __call__(self, error_class: int, number: int, message: str) -> None:
        if error_class == self.gdal.CE_Debug:
            self.lines.append(f"{message}\n")
            return
        self.count += 1
        if self.limit > 0 and self.count > self.limit:
            return
        kind = "Warning" if error_class == self.gdal.CE_Warning else "ERROR"
        self.lines.append(f"{kind} {number}: {message}\n")
        if self.count == self.limit:
            self.lines.append(f"More than {self.limit} errors or warnings have been reported. "
                              "No more will be reported from now.\n")


def mdiminfo(gdal: Any, url: str, limit: int) -> dict[str, Any]:
    """The reply for one store: gdalmdiminfo's stdout and stderr, or its exit status and stderr."""
    messages = _Messages(gdal, limit)
    gdal.PushErrorHandler(messages)
    try:
        dataset = gdal.OpenEx(url, gdal.OF_MULTIDIM_RASTER | gdal.OF_VERBOSE_ERROR)
        if dataset is None:
            messages.lines.append(f"gdalmdiminfo failed - unable to open '{url}'.\n")
            return {"exit": 1, "stderr": "".join(messages.lines)}
        text = gdal.MultiDimInfo(dataset, detailed=True, as_text=True)
        del dataset  # closed here, so that what closing says is this read's
    finally:
        gdal.PopErrorHandler()
    if text is None:
        return {"exit": 1, "stderr": "".join(messages.lines)}
    if isinstance(text, bytes):  # the bindings hand back bytes where GDAL's text is not UTF-8 (a char array's bytes)
        text = text.decode("utf-8", "replace")  # as a terminal shows gdalmdiminfo's: U+FFFD where it is not
    return {"stdout": text, "stderr": "".join(messages.lines)}


def main() -> None:
    from osgeo import gdal  # type: ignore[import-not-found, unused-ignore]

    gdal.DontUseExceptions()  # errors go to the handler, as in the tool (no Python exceptions)
    limit = int(os.environ.get("CPL_MAX_ERROR_REPORTS", "1000") or 0)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        reply = {"id": request.get("id"), **mdiminfo(gdal, str(request["url"]), limit)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
