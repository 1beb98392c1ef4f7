"""read.py as a long-lived conformance reader (the ``serve`` key, docs/plugins.md): Python, numpy and
zarr-python are loaded once, and zarr-python's event loop (3.x) started once, then each request is one JSON
line on stdin, ``{"path": STORE, ...}``, and each reply one JSON line on stdout, in request order: the model
JSON read.py prints for that store, or ``{"exit": 1, "stderr": ""}`` where read.py would exit 1 (what it says
on stderr, warnings and the failure line, is written on this worker's stderr as read.py writes it). The
worker ends at end of input.

Each request runs read.py's own ``main``, so a served read is the one-shot read (tests/conformance/
test_serve.py compares them on every store of a report).

    python serve.py
"""
from __future__ import annotations

import contextlib
import io
import json
import sys

import read


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = read.main(["read.py", str(json.loads(line)["path"])])
        sys.stderr.flush()
        reply = printed.getvalue() if status == 0 else json.dumps({"exit": status, "stderr": ""})
        sys.stdout.write(reply + "\n")  # json.dump writes one line: a newline in a text is \\n
        sys.stdout.flush()


if __name__ == "__main__":
    main()
