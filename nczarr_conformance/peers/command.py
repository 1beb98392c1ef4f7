"""Any implementation, in any language, as a peer: a command that reads a store into the canonical model
(docs/contracts/model.md, its JSON Schema ``nczarr_conformance/schema/model.schema.json``) and/or writes
a store from it.

A command is a template split with ``shlex`` (so quoting is the shell's) and run without a shell; each
placeholder inside an argument is replaced by its value:

reader (``--reader NAME='CMD'``)
    ``{url}``      the store as a netcdf-c URL: ``file:///abs/store#mode=nczarr,file`` (``…,zip`` for a zip)
    ``{path}``     the store's local path: a directory, or a zip file
    ``{zip}``      the store as a zip file (a directory store is zipped for the call)
    ``{out_json}`` where to write the model JSON; without it the model is read from standard output
writer (``--writer NAME='CMD'``)
    ``{model_json}`` the intended model, as canonical JSON (read it)
    ``{path}``       the directory to create the store in (it does not exist yet)
    ``{url}``        that directory as a netcdf-c URL (``file:///abs/store#mode=nczarr,file``)
    ``{zip}``        a zip file to create instead: the store is then that zip
    ``{json}``       a kerchunk JSON file to create instead (``…/STORE.json``): the store is then those references
    ``{parquet}``    a kerchunk Parquet directory to create instead (``…/STORE.parq``), likewise
    ``{options}``    the case's writer options as a JSON object (``{"separator": "/"}``); a writer
                     without it is not asked to write a case that has options

Braces meant literally are doubled (``{{``). A call that exits non-zero, is killed or outlasts its
timeout fails its cell with one line (the last line of its stderr); the stderr's last 4,000 characters are
the cell's detail (only its last 64 KiB are ever held in memory). A reader's model JSON (stdout, or
``{out_json}``) is capped at 64 MiB: past it the call is killed and the cell fails saying so. On a timeout the
call's process group is killed and the cell is "timed out after N s" even where something it started in a
session of its own still holds its stdout open. ``available()`` is whether the command's program is on ``PATH`` (or,
with a ``/``, exists; a leading ``~`` is the home directory), so a missing tool is named in the run's summary.

Many implementations go in a TOML file (``nczarr-conformance.toml`` in the working directory, or
``--config FILE``)::

    [implementations.mytool]
    name = "mytool 1.2"                          # shown in the reports (default: the id)
    reader = "mytool dump --json {url} {out_json}"
    writer = "mytool load {model_json} {path}"
    caps = "nczarr,attributes,groups,strings"    # or a list; default: all (peers/capabilities.py)
    env = { MYTOOL_QUIET = "1" }                 # added to the environment
    timeout = 60                                 # seconds per call (default 120)
    version = "mytool --version"                 # its first line is the reported version
    requires = ["mytool"]                        # programs a wrapper script runs: missing → skipped, named
    preload = ["zarr"]                           # a Python adapter's imports, done once (peers/forkserver.py)
    serve = "mytool serve"                       # a long-lived reader: one JSON request a line (below)
    known = "known.toml"                         # its pinned faults: a file of [[known]] tables, or inline
    flavor = "nczarr-2-upper"                    # the layout its writer writes (a known fault's evidence may
                                                 # name its reference writer by it)

``known`` is the implementation's pinned faults (conformance/known.py says an entry's keys): a path to a TOML
file of ``[[known]]`` tables, relative to the config's directory (beside the adapter), or an array of inline
tables. They are checked when a run loads them.

``serve`` is a command with no placeholders that starts a worker: it reads one request a line on stdin,
``{"id": ID, "path": …, "url": …}`` (the ``{path}`` and ``{url}`` the reader would get), and answers each
with one line on stdout carrying that id (serve protocol 2, nczarr_conformance/workers.py):
``{"id": ID, "stdout": TEXT}``, TEXT the model JSON the ``reader`` prints for that store, or
``{"id": ID, "exit": N, "stderr": TEXT}`` where the reader would exit N with TEXT on stderr. A line that is
not the request's reply fails that read only, and the worker is replaced. A run starts a worker when a read
needs one (one per read in flight), keeps it for the next reads, and ends it with ``close()``; a worker that dies or
outlasts the timeout on a read is killed, that read is graded as a reader process's death or timeout is, and
the next read starts a new worker. The ``reader`` stays the definition: a run without ``serve`` uses it.

A config's commands run in the config file's directory; command-line ones in the working directory.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import re
import select
import shlex
import shutil
import signal
import string
import subprocess
import tempfile
import threading
import time
import tomllib
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nczarr_conformance.errors import UsageError
from nczarr_conformance.flavor_names import WRITE_FLAVORS
from nczarr_conformance.limits import MAX_JSON_DEPTH, json_depth
from nczarr_conformance.model import Dataset
from nczarr_conformance.peers.base import CannotExpress, Peer, PeerFailed, reject_options
from nczarr_conformance.peers.capabilities import ALL
from nczarr_conformance.peers.capabilities import parse as parse_caps
from nczarr_conformance.workers import REPLY_LIMIT, STDERR_TAIL, LineReader, WorkerPool, WorkerProtocolError

READ_FIELDS = ("url", "path", "zip", "out_json")
WRITE_FIELDS = ("model_json", "path", "url", "zip", "json", "parquet", "options")
#: the writer placeholders that name the store to create, each with the suffix it gives the store's name
#: (``path`` and ``url``: the directory itself); a reference store's suffix is what readers know it by
STORE_SUFFIXES = {"path": "", "url": "", "zip": ".zip", "json": ".json", "parquet": ".parq"}
DEFAULT_TIMEOUT = 120.0
#: how much of a failing command's stderr a cell keeps (the end: where a traceback says what broke)
DETAIL_LIMIT = 4000
#: the most a reader may print on stdout (its model's JSON); past it the cell fails and the call is killed
STDOUT_LIMIT = REPLY_LIMIT
CONFIG_NAME = "nczarr-conformance.toml"
CONFIG_KEYS = frozenset({"name", "reader", "writer", "caps", "env", "timeout", "version", "requires",
                         "preload", "serve", "known", "flavor"})
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\Z")


@dataclass(frozen=True)
class Template:
    """One command line: its ``shlex`` words, each a format string over the placeholders."""

    text: str
    words: tuple[str, ...]
    fields: frozenset[str]

    @classmethod
    def parse(cls, text: str, allowed: tuple[str, ...], where: str) -> Template:
        """Split and check ``text``: an unknown placeholder or a bad quote is a usage error naming ``where``."""
        try:
            words = tuple(shlex.split(text))
        except ValueError as exc:
            raise UsageError(f"{where}: cannot split {text!r}: {exc}") from None
        if not words:
            raise UsageError(f"{where}: the command is empty")
        fields: set[str] = set()
        for word in words:
            try:
                names = [name for _, name, _, _ in string.Formatter().parse(word) if name is not None]
            except ValueError as exc:
                raise UsageError(f"{where}: {word!r}: {exc} (double a literal brace: {{{{)") from None
            unknown = [n for n in names if n not in allowed]
            if unknown:
                raise UsageError(f"{where}: unknown placeholder {{{unknown[0]}}}; known: "
                                 + ", ".join(f"{{{n}}}" for n in allowed))
            fields.update(names)
        return cls(text, words, frozenset(fields))

    def expand(self, values: Mapping[str, str]) -> list[str]:
        first, *rest = [word.format_map(values) for word in self.words]
        return [os.path.expanduser(first), *rest]

    @property
    def program(self) -> str:
        """The first word, ``~`` expanded: a tool in a per-user virtual environment
        (``~/.cache/venv/bin/python``) is spelled alike on every machine, and there is no shell to expand it."""
        return os.path.expanduser(self.words[0])


def _program_missing(program: str, env: Mapping[str, str], cwd: Path | None = None) -> bool:
    if "/" in program:
        return not os.access(Path(cwd or ".") / program, os.X_OK)
    return shutil.which(program, path=env.get("PATH")) is None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _store_path(url: str) -> str:
    """The local path a matrix URL names: a bare path, or a ``file://`` URL (its fragment dropped)."""
    if url.startswith("file://"):
        return url[len("file://"):].split("#", 1)[0]
    return url


def _file_url(path: str) -> str:
    kind = "zip" if Path(path).is_file() else "file"
    return f"file://{os.path.abspath(path)}#mode=nczarr,{kind}"


def _zip_directory(store: Path, target: Path) -> None:
    """The store's objects in a zip, keys at the top level (how netcdf-c's ``mode=zip`` lays them out)."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as archive:
        for item in sorted(store.rglob("*")):
            if item.is_file():
                archive.write(item, item.relative_to(store).as_posix())


class CommandPeer(Peer):
    """A peer that is a command line (see the module's docstring for the placeholders)."""

    def __init__(self, peer_id: str, *, reader: str | None = None, writer: str | None = None,
                 caps: frozenset[str] = ALL, env: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, cwd: Path | None = None, version_command: str | None = None,
                 name: str | None = None, source: str = "the command line",
                 requires: tuple[str, ...] = (), preload: tuple[str, ...] = (), serve: str | None = None,
                 flavor: str | None = None, known: tuple[Mapping[str, Any], ...] = (), known_source: str = "",
                 ) -> None:
        where = f"{source}: {peer_id}"
        if not ID_PATTERN.match(peer_id):
            raise UsageError(f"{where}: an implementation id is letters, digits and . _ + - (not {peer_id!r})")
        if reader is None and writer is None:
            raise UsageError(f"{where}: neither a reader nor a writer command")
        if timeout <= 0:
            raise UsageError(f"{where}: timeout must be positive, not {timeout}")
        self.id, self.name, self.source = peer_id, name or peer_id, source
        if flavor is not None and flavor not in WRITE_FLAVORS:
            raise UsageError(f"{where}: flavor {flavor!r} is none of {', '.join(WRITE_FLAVORS)}")
        if flavor is not None and writer is None:
            raise UsageError(f"{where}: a flavor says what a writer writes (no writer command)")
        self.flavor = flavor
        self.known, self.known_source = tuple(known), known_source or source
        self.capabilities = caps
        self.env = dict(env or {})
        self.timeout = float(timeout)
        self.cwd = cwd
        self.requires = tuple(requires)
        #: modules a Python adapter imports, loaded once in a fork server (peers/forkserver.py)
        self.preload = tuple(preload)
        self._servers: dict[str, queue.SimpleQueue[_ForkServer]] = {}
        self._servers_lock = threading.Lock()
        self.reader = Template.parse(reader, READ_FIELDS, f"{where} reader") if reader is not None else None
        self.writer = Template.parse(writer, WRITE_FIELDS, f"{where} writer") if writer is not None else None
        self.version_command = (Template.parse(version_command, (), f"{where} version")
                                if version_command is not None else None)
        self.serve = Template.parse(serve, (), f"{where} serve") if serve is not None else None
        if self.serve is not None and self.reader is None:
            raise UsageError(f"{where} serve: a worker needs the reader it stands for (no reader command)")
        self._pool = (WorkerPool(self.serve.expand({}), self._environment, self.cwd)
                      if self.serve is not None else None)
        if self.reader is not None and not self.reader.fields & {"url", "path", "zip"}:
            raise UsageError(f"{where} reader: the command names no store: use {{url}}, {{path}} or {{zip}}")
        if self.writer is not None and "model_json" not in self.writer.fields:
            raise UsageError(f"{where} writer: the command has no {{model_json}} to read the model from")
        if self.writer is not None and not self.writer.fields & set(STORE_SUFFIXES):
            raise UsageError(f"{where} writer: the command names no store: use {{path}}, {{url}}, {{zip}}, "
                             f"{{json}} or {{parquet}}")
        self.reads = self.reader is not None
        self.writes = self.writer is not None

    # ---- running one call ----------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def available(self) -> str | None:
        env = self._environment()
        # a wrapper script (python3 adapters/TOOL/read.py) is always there; the tool it runs may not be
        programs = [t.program for t in (self.reader, self.writer, self.serve) if t is not None] + list(self.requires)
        missing = sorted({p for p in programs if _program_missing(p, env, self.cwd)})
        return f"{', '.join(missing)} not installed" if missing else None

    def _run(self, argv: list[str], what: str) -> tuple[bytes, str]:
        """(stdout, stderr) of one call; a non-zero exit, a signal or the timeout raises PeerFailed with
        one line and the stderr as its detail. The call gets a session of its own, so that a timeout ends
        everything it started (a shell's children too), not only the first process."""
        if self.preload and len(argv) >= 2 and argv[1].endswith(".py") and what != "version":
            server = self._server(argv[0])
            if server is not None:
                try:
                    returncode, out, err = server.call(argv[1:], self._environment(), self.cwd, self.timeout)
                finally:
                    self._servers[argv[0]].put(server)
                return self._outcome(what, returncode, out, err)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=self._environment(), cwd=self.cwd, start_new_session=True)
        except OSError as exc:
            raise PeerFailed(f"{what}: cannot start {argv[0]}: {exc.strerror or exc}") from None
        with proc:
            ended, out, err = _drain(proc, self.timeout)
        if ended == "too much":
            raise PeerFailed(f"{what} wrote more than {STDOUT_LIMIT // 1024**2} MiB on stdout (the cap of a "
                             "model's JSON)", err.decode("utf-8", "replace")[-DETAIL_LIMIT:])
        return self._outcome(what, None if ended == "timeout" else proc.returncode, out, err)

    def _outcome(self, what: str, returncode: int | None, out: bytes, err: bytes) -> tuple[bytes, str]:
        detail = err.decode("utf-8", "replace")[-DETAIL_LIMIT:]
        if returncode is None:
            raise PeerFailed(f"{what} timed out after {self.timeout:g} s", detail)
        if returncode < 0:
            raise PeerFailed(f"{what} killed by signal {-returncode}: {_last_line(detail) or 'no message'}",
                             detail)
        if returncode != 0:
            raise PeerFailed(f"{what} exit {returncode}: {_last_line(detail) or 'no message'}", detail)
        return out, detail

    def _server(self, interpreter: str) -> _ForkServer | None:
        """An idle fork server of ``interpreter`` (one per call in flight, kept for the run); None where
        one cannot start (its preload fails): the call then starts a process as any other does."""
        with self._servers_lock:
            idle = self._servers.setdefault(interpreter, queue.SimpleQueue())
        try:
            return idle.get_nowait()
        except queue.Empty:
            pass
        try:
            return _ForkServer([os.path.expanduser(interpreter), str(Path(__file__).with_name("forkserver.py")),
                                *self.preload], self._environment(), self.cwd)
        except (OSError, ValueError):
            return None

    def _served(self, request: Mapping[str, str]) -> tuple[bytes, str]:
        """(stdout, stderr) the reader would give for ``request``, answered by a ``serve`` worker."""
        assert self._pool is not None
        try:
            returncode, out, err = self._pool.call(request, self.timeout)
        except OSError as exc:
            raise PeerFailed(f"reader: cannot start {self._pool.argv[0]}: {exc.strerror or exc}") from None
        except WorkerProtocolError as exc:
            raise PeerFailed(f"reader: {exc}", exc.stderr.decode("utf-8", "replace")[-DETAIL_LIMIT:]) from None
        return self._outcome("reader", returncode, out, err)

    def close(self) -> None:
        """End the workers kept for the run (``serve``) and its idle fork servers (``preload``): a later call
        starts new ones. Why the fork servers too: each holds an interpreter with the adapter's libraries
        imported (a VirtualiZarr writer's: about 200 MB), which would otherwise live until the process exits."""
        if self._pool is not None:
            self._pool.close()
        with self._servers_lock:
            idle = list(self._servers.values())
        for servers in idle:
            while True:
                try:
                    servers.get_nowait().close()
                except queue.Empty:
                    break

    def version(self) -> str:
        if self.version_command is None:
            return "unknown (no version command)"
        try:
            out, err = self._run(self.version_command.expand({}), "version")
        except PeerFailed as exc:
            return f"unknown ({exc})"
        text = out.decode("utf-8", "replace") or err
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[0][:100] if lines else "unknown"

    # ---- the Peer interface --------------------------------------------------------------------

    def read(self, url: str) -> Dataset:
        return self.read_detailed(url)[0]

    def read_detailed(self, url: str) -> tuple[Dataset, str]:
        if self.reader is None:
            raise NotImplementedError(f"{self.id} has no reader command")
        path = _store_path(url)
        with tempfile.TemporaryDirectory(prefix="ncz-read-") as tmp:
            values = {"url": _file_url(path), "path": os.path.abspath(path), "out_json": str(Path(tmp) / "model.json")}
            if "zip" in self.reader.fields:
                values["zip"] = os.path.abspath(path)
                if Path(path).is_dir():
                    values["zip"] = str(Path(tmp) / "store.zip")
                    _zip_directory(Path(path), Path(values["zip"]))
            if self.serve is not None:
                out, detail = self._served({"path": values["path"], "url": values["url"]})
            else:
                out, detail = self._run(self.reader.expand(values), "reader")
            if "out_json" in self.reader.fields:
                produced = Path(values["out_json"])
                if not produced.is_file():
                    raise PeerFailed("reader exit 0 but wrote no {out_json}", detail)
                out = _head(produced, STDOUT_LIMIT + 1)
                if len(out) > STDOUT_LIMIT:
                    raise PeerFailed(f"reader wrote more than {STDOUT_LIMIT // 1024**2} MiB in {{out_json}} (the "
                                     "cap of a model's JSON)", detail)
        return self._model(out, detail), detail

    @staticmethod
    def _model(out: bytes, detail: str) -> Dataset:
        depth = json_depth(out)  # before json.loads recurses: Python's parser gives RecursionError past ~1000
        if depth > MAX_JSON_DEPTH:
            raise PeerFailed(f"reader output is JSON nested {depth} levels deep; more than {MAX_JSON_DEPTH} is "
                             "refused (the canonical model nests far less: docs/contracts/model.md)", detail)
        try:
            doc: Any = json.loads(out)
            if not isinstance(doc, dict):
                raise TypeError(f"a JSON {type(doc).__name__}, not an object")
            return Dataset.from_json(doc)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            what = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:200]
            raise PeerFailed(f"reader output is not the canonical model (docs/contracts/model.md): {what}",
                             detail) from None

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        if self.writer is None:
            raise NotImplementedError(f"{self.id} has no writer command")
        if options and "options" not in self.writer.fields:
            reject_options(options, f"{self.id} (its writer command has no {{options}})")
        model_json = target.parent / f"{target.name}.model.json"
        model_json.write_text(json.dumps(dataset.to_json(), ensure_ascii=False), encoding="utf-8")
        suffix = next((STORE_SUFFIXES[f] for f in ("zip", "json", "parquet") if f in self.writer.fields), "")
        store = target.parent / f"{target.name}{suffix}"
        values = {"model_json": os.path.abspath(model_json), "path": os.path.abspath(target), "url": f"file://{os.path.abspath(target)}#mode=nczarr,file",
                  "options": json.dumps(options, sort_keys=True),
                  **{f: os.path.abspath(target.parent / f"{target.name}{STORE_SUFFIXES[f]}")
                     for f in ("zip", "json", "parquet")}}
        _, detail = self._run(self.writer.expand(values), "writer")
        if not store.exists():
            raise PeerFailed(f"writer exit 0 but wrote nothing at {store.name}", detail)
        return str(store)


# ---- declaring command peers: the command line and the TOML file ------------------------------------

class _ForkServer:
    """One ``forkserver.py`` process (see there): a call is a fork of it, run as the script would run."""

    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: Path | None) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=dict(env), cwd=cwd, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.replies = self.proc.stdin, LineReader(self.proc.stdout.fileno())
        if not self._line(PRELOAD_SECONDS).get("ready"):
            self.close()
            raise ValueError("the fork server did not start")
        _SERVERS.append(self)

    def _line(self, timeout: float) -> dict[str, Any]:
        line = self.replies.line(timeout)
        return json.loads(line) if line else {}

    def call(self, argv: list[str], env: Mapping[str, str], cwd: Path | None,
             timeout: float) -> tuple[int | None, bytes, bytes]:
        """(exit status or None on timeout, stdout, stderr) of the script run with ``argv``."""
        with tempfile.TemporaryDirectory(prefix="ncz-fork-") as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            request = {"argv": argv, "cwd": str(cwd) if cwd else None, "env": dict(env), "out": str(out),
                       "err": str(err)}
            self.stdin.write((json.dumps(request) + "\n").encode())
            self.stdin.flush()
            pid = self._line(PRELOAD_SECONDS).get("pid")
            if pid is None:
                raise PeerFailed("the fork server stopped")
            done = self._line(timeout)
            if not done:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                self._line(PRELOAD_SECONDS)
            status = done.get("status")
            printed = _head(out, STDOUT_LIMIT + 1)
            if len(printed) > STDOUT_LIMIT:
                raise PeerFailed(f"the call wrote more than {STDOUT_LIMIT // 1024**2} MiB on stdout (the cap of "
                                 "a model's JSON)", _tail(err).decode("utf-8", "replace")[-DETAIL_LIMIT:])
            return (int(status) if status is not None else None), printed, _tail(err)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.stdin.close()
        self.proc.kill()
        self.proc.wait()
        with contextlib.suppress(ValueError):  # closed before the process exits: nothing left for atexit
            _SERVERS.remove(self)




def _head(path: Path, size: int) -> bytes:
    with path.open("rb") as stream:
        return stream.read(size)


def _tail(path: Path) -> bytes:
    """The end of a call's stderr file (:data:`STDERR_TAIL` bytes): all a cell keeps of it."""
    with path.open("rb") as stream:
        stream.seek(max(0, stream.seek(0, os.SEEK_END) - STDERR_TAIL))
        return stream.read()


def _drain(proc: subprocess.Popen[bytes], timeout: float) -> tuple[str, bytes, bytes]:
    """("exited" | "timeout" | "too much", stdout, the end of stderr) of a call started with both pipes.

    Unlike ``communicate()``, memory stays bounded (stdout up to :data:`STDOUT_LIMIT`, stderr's last
    :data:`STDERR_TAIL` bytes: issue 39 saw 1.5 GiB of stderr cost 4.7 GB) and so does time: the deadline
    holds even where a process the call started in a session of its own keeps the pipes open after the
    call's group is killed (``communicate()`` then waited as long as that process lived). On a timeout or
    too much output the call's process group is killed and the pipes are closed unread."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    ended = "exited"
    while streams:
        left = deadline - time.monotonic()
        ready = select.select(list(streams), [], [], left)[0] if left > 0 else []
        if not ready:
            ended = "timeout"
            break
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                del streams[fd]
                continue
            into = streams[fd]
            into += chunk
            if into is err and len(err) > 2 * STDERR_TAIL:
                del err[:-STDERR_TAIL]
        if len(out) > STDOUT_LIMIT:
            ended = "too much"
            break
    if ended == "exited":
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            ended = "timeout"  # it closed its pipes but still runs
    if ended != "exited":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return ended, (b"" if ended == "too much" else bytes(out)), bytes(err[-STDERR_TAIL:])


#: seconds a fork server may take to import its preload (and to answer a fork)
PRELOAD_SECONDS = 60.0
_SERVERS: list[_ForkServer] = []


@atexit.register
def _close_servers() -> None:
    for server in list(_SERVERS):  # a copy: each close() takes itself out of the list
        server.close()


def split_assignment(text: str, option: str) -> tuple[str, str]:
    """``NAME=VALUE`` of ``--reader``/``--writer``/``--caps``; anything else is a usage error."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"{option} {text!r}: expected NAME=VALUE")
    return name.strip(), value


def from_command_line(readers: list[str], writers: list[str], caps: list[str],
                      timeout: float = DEFAULT_TIMEOUT) -> dict[str, dict[str, Any]]:
    """The declarations ``--reader``/``--writer``/``--caps`` make, by implementation id (for ``build``)."""
    specs: dict[str, dict[str, Any]] = {}
    for option, items in (("--reader", readers), ("--writer", writers)):
        for item in items:
            name, command = split_assignment(item, option)
            spec = specs.setdefault(name, {"timeout": timeout, "source": "the command line"})
            if option.lstrip("-") in spec:
                raise UsageError(f"{option} {name}: given twice")
            spec[option.lstrip("-")] = command
    for item in caps:
        name, value = split_assignment(item, "--caps")
        specs.setdefault(name, {"source": "the command line"})["caps"] = value
    return specs


def load_config(path: Path) -> dict[str, dict[str, Any]]:
    """The declarations of a TOML file (see the module's docstring), by implementation id."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not TOML: {exc}") from None
    extra = sorted(set(doc) - {"implementations"})
    if extra:
        raise UsageError(f"{path}: unknown table {extra[0]!r} (expected [implementations.NAME])")
    table = doc.get("implementations", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [implementations] must be a table of [implementations.NAME] tables")
    specs: dict[str, dict[str, Any]] = {}
    for name, spec in table.items():
        where = f"{path} [implementations.{name}]"
        if not isinstance(spec, dict):
            raise UsageError(f"{where}: must be a table")
        unknown = sorted(set(spec) - CONFIG_KEYS)
        if unknown:
            raise UsageError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(sorted(CONFIG_KEYS))}")
        for key in ("name", "reader", "writer", "version", "serve"):
            if key in spec and not isinstance(spec[key], str):
                raise UsageError(f"{where}: {key} must be a string")
        requires = spec.get("requires", [])
        if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
            raise UsageError(f"{where}: requires must be a list of program names")
        preload = spec.get("preload", [])
        if not isinstance(preload, list) or not all(isinstance(r, str) for r in preload):
            raise UsageError(f"{where}: preload must be a list of module names")
        env = spec.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise UsageError(f"{where}: env must be a table of strings")
        timeout = spec.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise UsageError(f"{where}: timeout must be a number of seconds")
        if "flavor" in spec and not isinstance(spec["flavor"], str):
            raise UsageError(f"{where}: flavor must be a string")
        known, known_source = _known(spec.get("known", []), path.resolve().parent, where)
        specs[name] = {**spec, "timeout": float(timeout), "cwd": path.resolve().parent, "source": where,
                       "known": known, "known_source": known_source}
    return specs


def _known(value: Any, directory: Path, where: str) -> tuple[list[Any], str]:
    """A declaration's ``known``: (its entries, where they are declared). A string is a file of ``[[known]]``
    tables relative to the config's directory; a list holds the entries inline. The entries themselves are
    checked by conformance/known.py when a run loads them."""
    if isinstance(value, list):
        return value, where
    if not isinstance(value, str):
        raise UsageError(f"{where}: known must be a file name or an array of tables")
    path = directory / value
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{where}: known file {path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not TOML: {exc}") from None
    extra = sorted(set(doc) - {"known"})
    if extra:
        raise UsageError(f"{path}: unknown table {extra[0]!r} (expected [[known]] entries)")
    entries = doc.get("known", [])
    if not isinstance(entries, list):
        raise UsageError(f"{path}: known must be an array of tables ([[known]])")
    return entries, str(path)


def build(specs: Mapping[str, Mapping[str, Any]], *, overrides: Mapping[str, Mapping[str, Any]] | None = None,
          ) -> list[CommandPeer]:
    """Command peers from declarations (``load_config``), with the command line's (``from_command_line``)
    taking precedence key by key: ``--caps NAME=…`` narrows a configured NAME. ``--caps`` for an id that
    no command declares is a usage error."""
    merged: dict[str, dict[str, Any]] = {name: dict(spec) for name, spec in specs.items()}
    for name, spec in (overrides or {}).items():
        if name not in merged and set(spec) <= {"caps", "source"}:
            raise UsageError(f"--caps {name}: no --reader, --writer or configured implementation {name!r}")
        base = merged.setdefault(name, {})
        for key, value in spec.items():
            if key == "source" and "source" in base:
                continue  # a configured implementation keeps naming its file
            base[key] = value
    peers = []
    for name, spec in merged.items():
        where = spec.get("source", "the command line")
        try:
            caps = parse_caps(spec["caps"], where=f"{where}: {name} caps") if "caps" in spec else ALL
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        peers.append(CommandPeer(name, reader=spec.get("reader"), writer=spec.get("writer"), caps=caps,
                                 env=spec.get("env"), timeout=float(spec.get("timeout", DEFAULT_TIMEOUT)),
                                 cwd=spec.get("cwd"), version_command=spec.get("version"), name=spec.get("name"),
                                 source=where, requires=tuple(spec.get("requires", ())),
                                 preload=tuple(spec.get("preload", ())), serve=spec.get("serve"),
                                 flavor=spec.get("flavor"), known=tuple(spec.get("known", ())),
                                 known_source=spec.get("known_source", "")))
    return peers


def find_config(explicit: str | None, cwd: Path | None = None) -> Path | None:
    """``--config FILE`` (which must exist), else ``nczarr-conformance.toml`` in the working directory if
    there is one."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise UsageError(f"{explicit}: --config file not found")
        return path
    default = (cwd or Path.cwd()) / CONFIG_NAME
    return default if default.is_file() else None


__all__ = ["CannotExpress", "CommandPeer", "Template", "build", "find_config", "from_command_line",
           "load_config"]
