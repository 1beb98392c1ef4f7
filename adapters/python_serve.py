"""Any Python reader adapter with a ``main(argv) -> int`` as a long-lived conformance reader (the ``serve``
key, docs/plugins.md): the script is imported once (its libraries with it), then each request is one JSON
line on stdin, ``{"id": ID, "path": …, "url": …}``, and each reply one JSON line on stdout carrying the
request's id (serve protocol 2): ``{"id": ID, "stdout": TEXT}``, TEXT what ``main`` printed on stdout for that
store, or ``{"id": ID, "exit": N, "stderr": ""}`` where it returned N (what it printed on stderr is written on
this worker's stderr, as the one-shot script writes it). The worker ends at end of input.

Only replies reach the worker's stdout: file descriptor 1 is pointed at stderr before the adapter is
imported, so what a library writes there itself (a C library's printf, ``os.write(1, …)``) lands in the
read's stderr instead of passing for a reply (issue 39).

    python python_serve.py ADAPTER.py FIELD     (FIELD: the request field the adapter takes, path or url)

Each request runs the adapter's own ``main`` with the argv the one-shot reader gets, ``[ADAPTER.py, VALUE]``,
so a served read is the one-shot read (tests/conformance/test_serve.py compares them store by store).
Standalone on purpose (standard library only): it runs under the adapter's own interpreter.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import sys
from pathlib import Path


def main() -> None:
    script, field = sys.argv[1], sys.argv[2]
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)  # anything written on fd 1 from here on is stderr: only replies go to ``replies``
    sys.path.insert(0, str(Path(script).resolve().parent))  # as ``python ADAPTER.py`` puts it first
    spec = importlib.util.spec_from_file_location("__adapter__", script)
    assert spec is not None and spec.loader is not None, script
    adapter = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = adapter  # registered, as a module its own dataclasses look up by name
    spec.loader.exec_module(adapter)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = adapter.main([script, str(request[field])])
        sys.stdout.flush()
        sys.stderr.flush()
        reply = ({"id": request.get("id"), "stdout": printed.getvalue()} if status == 0
                 else {"id": request.get("id"), "exit": status, "stderr": ""})
        replies.write(json.dumps(reply) + "\n")  # one line: a newline inside a text is \n
        replies.flush()


if __name__ == "__main__":
    main()
