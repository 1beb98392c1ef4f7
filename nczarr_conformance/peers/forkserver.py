"""A fork server for a Python command adapter: its libraries imported once, each call a fresh fork.

A command peer's call to ``PYTHON SCRIPT.py ARGS`` spends most of its time importing (zarr-python 3:
about 0.5 s of a 0.8 s call, measured for issue #26). With ``preload`` in its configuration
(peers/command.py), the peer starts ``PYTHON forkserver.py MODULE…`` once, which imports the modules
and then, per request, forks a child that runs the script as ``__main__`` with the call's argv, working
directory, environment, stdout and stderr files, in a session of its own: the call's output, exit
status and process group are those of a process started for it, minus the imports.

Standalone on purpose (standard library only, run by the adapter's own interpreter, any Python ≥ 3.8).
Protocol, one JSON object a line: request ``{"argv", "cwd", "env", "out", "err"}``; replies ``{"pid"}``
once forked, then ``{"status"}`` (the exit code, or minus the signal number) once the child is reaped.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import sys
import traceback
from typing import Any


def _child(request: dict[str, Any]) -> None:
    """Become the call: never returns."""
    code = 1
    try:
        os.setsid()
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        argv = request["argv"]
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))  # as ``python SCRIPT`` puts it first
        try:
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as exc:  # as the interpreter maps sys.exit's argument to an exit status
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code & 0xFF
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _reply(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")  # the parent's stdout is the pipe; a child's never replies
    sys.stdout.flush()


def main() -> None:
    # this file's folder (nczarr_conformance/peers: base.py, netcdf4.py, …) must not shadow what the
    # adapter imports, nor be on its path
    del sys.path[0]
    # fork copies only the forking thread: a thread pool that numpy's BLAS starts at import (one thread a
    # core) may hold a lock at the fork, and a child that needs it waits forever (reads timed out under load,
    # issue #26). Loaded single-threaded, the server is safe to fork; each call's own environment is the
    # request's (the child's BLAS is single-threaded after a fork anyway).
    for knob in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[knob] = "1"
    for name in sys.argv[1:]:
        importlib.import_module(name)
    _reply({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        _reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _reply({"status": -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)})


if __name__ == "__main__":
    main()
