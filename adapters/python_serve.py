"""Any Python reader adapter with a ``main(argv) -> int`` as a long-lived conformance reader (the ``serve``
key, docs/plugins.md): the script is imported once (its libraries with it), then each request is one JSON
line on stdin, ``{"path": …, "url": …}``, and each reply one JSON line on stdout, in request order: what
``main`` printed on stdout for that store, or ``{"exit": N, "stderr": ""}`` where it returned N (what it
printed on stderr is written on this worker's stderr, as the one-shot script writes it). The worker ends at
end of input.

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
import sys
from pathlib import Path


def main() -> None:
    script, field = sys.argv[1], sys.argv[2]
    sys.path.insert(0, str(Path(script).resolve().parent))  # as ``python ADAPTER.py`` puts it first
    spec = importlib.util.spec_from_file_location("__adapter__", script)
    assert spec is not None and spec.loader is not None, script
    adapter = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = adapter  # registered, as a module its own dataclasses look up by name
    spec.loader.exec_module(adapter)
    for line in sys.stdin:
        if not line.strip():
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = adapter.main([script, str(json.loads(line)[field])])
        sys.stderr.flush()
        text = printed.getvalue()
        # json.dump writes one line (a newline inside a text is \n); the reply must be one line
        reply = text.rstrip("\n") if status == 0 else json.dumps({"exit": status, "stderr": ""})
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
