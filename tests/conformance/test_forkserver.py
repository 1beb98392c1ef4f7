"""Issue #26: a command peer with ``preload`` runs each Python adapter call as a fork of a server
(peers/forkserver.py). Every outcome must be what the same call started as its own process gives:
the expected values come from the plain CommandPeer (subprocess), the fork server must match them."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

from nczarr_conformance.peers.base import PeerFailed
from nczarr_conformance.peers.command import CommandPeer

SCRIPT = r'''
import os, sys, time
what = open(sys.argv[1]).read().strip()
print("model from", os.path.basename(os.getcwd()), os.environ.get("NCZ_FORK_TEST"), sys.argv[1:])
print("a line on stderr", file=sys.stderr)
if what == "exit3":
    print("the reason, last", file=sys.stderr)
    sys.exit(3)
if what == "raise":
    raise ValueError("adapter bug")
if what == "signal":
    sys.stdout.flush()
    os.kill(os.getpid(), 9)
if what == "sleep":
    time.sleep(30)
'''


def _outcome(peer: CommandPeer, argv: list[str]) -> tuple[str, bytes | None, str]:
    try:
        out, detail = peer._run(argv, "reader")
    except PeerFailed as exc:
        return f"failed: {exc}", None, str(getattr(exc, "detail", ""))
    return "ok", out, detail


@pytest.mark.parametrize("what", ["ok", "exit3", "raise", "signal", "sleep"])
def test_a_forked_call_gives_what_a_started_process_gives(tmp_path, what):
    (tmp_path / "work").mkdir()
    script = tmp_path / "adapter.py"
    script.write_text(SCRIPT)
    (tmp_path / "work" / "case.txt").write_text(what)
    argv = [sys.executable, str(script), "case.txt"]
    kw = {"reader": f"{sys.executable} {script} {{path}}", "env": {"NCZ_FORK_TEST": "yes"}, "timeout": 2.0,
          "cwd": tmp_path / "work"}
    plain = CommandPeer("plain", **kw)  # type: ignore[arg-type]
    forked = CommandPeer("forked", preload=("json",), **kw)  # type: ignore[arg-type]
    expected = _outcome(plain, argv)
    started = time.monotonic()
    got = _outcome(forked, argv)
    assert forked._servers[sys.executable].qsize() == 1  # the call went to a fork server, now idle again
    if what == "raise":  # the traceback names runpy's frames where the interpreter names none: compare the end
        assert got[0] == expected[0] == "failed: reader exit 1: ValueError: adapter bug"
        assert got[2].startswith("a line on stderr\nTraceback")
    else:
        assert got == expected
    if what == "sleep":
        assert got[0] == "failed: reader timed out after 2 s" and time.monotonic() - started < 10
    # the server survives every outcome: a second call is served by the same process
    assert _outcome(forked, argv)[0] == expected[0]
    assert forked._servers[sys.executable].qsize() == 1


def test_a_preload_that_cannot_import_falls_back_to_a_process(tmp_path):
    script = tmp_path / "adapter.py"
    script.write_text("print('plain')\n")
    peer = CommandPeer("p", reader=f"{sys.executable} {script} {{path}}", preload=("no_such_module_ncz",))
    assert peer._run([sys.executable, str(script), "x"], "reader")[0] == b"plain\n"
    assert Path(script).exists()


def test_report_runs_one_cell_per_core_by_default(tmp_path, monkeypatch):
    """Issue #26: without --jobs the matrix runs os.cpu_count() cells at a time."""
    import os

    from nczarr_conformance.cli import report
    from nczarr_conformance.conformance import matrix

    asked: list[int] = []

    class Stop(Exception):
        pass

    def run_matrix(*args: object, jobs: int = 1, **kw: object) -> None:
        asked.append(jobs)
        raise Stop

    monkeypatch.setattr(matrix, "run_matrix", run_matrix)
    monkeypatch.chdir(tmp_path)  # no nczarr-conformance.toml here: built-in peers only
    with contextlib.suppress(Stop, SystemExit):  # the CLI turns the stop into an exit status
        report.main(["report", "--out", str(tmp_path / "r"), "--peers", "ours"])
    assert asked == [os.cpu_count() or 1]


def test_the_script_imports_from_its_own_folder_and_not_the_servers(tmp_path):
    """``python SCRIPT`` puts the script's folder first on sys.path; the server's folder (peers/, with a
    base.py and a command.py) must not be there for the script."""
    (tmp_path / "helper_ncz.py").write_text("WHO = 'beside the script'\n")
    script = tmp_path / "adapter.py"
    script.write_text("import helper_ncz, importlib.util\n"
                      "print(helper_ncz.WHO, importlib.util.find_spec('command') is None)\n")
    peer = CommandPeer("p", reader=f"{sys.executable} {script} {{path}}", preload=("json",))
    out, _ = peer._run([sys.executable, str(script), "x"], "reader")
    assert out == b"beside the script True\n"
    assert peer._servers[sys.executable].qsize() == 1


def test_a_fork_server_that_preloads_numpy_forks_from_one_thread(tmp_path):
    """fork copies only the forking thread: numpy's BLAS pool (a thread a core, started at import) could hold a
    lock a child then waits on forever (cells timed out under load, issue #26). The server must be alone."""
    peer = CommandPeer("p", reader=f"{sys.executable} x.py {{path}}", preload=("numpy",))
    server = peer._server(sys.executable)
    assert server is not None
    try:
        threads = os.listdir(f"/proc/{server.proc.pid}/task")
        assert len(threads) == 1, f"the fork server runs {len(threads)} threads"
    finally:
        server.close()


def test_a_reply_already_read_is_not_waited_for_again(tmp_path, monkeypatch):
    """The fork server answers a call with two lines, its child's pid and then its exit status. When the child
    is done before the peer reads the first (a loaded machine), both lines arrive in one read: the second
    must be taken from what was read, not waited for on the pipe until the timeout (the 120 s "timeouts" and
    "the fork server stopped" of issue #26's reports, both from a file object's readline behind select)."""
    from nczarr_conformance.workers import LineReader

    script = tmp_path / "adapter.py"
    script.write_text("print('done')\n")
    forked = CommandPeer("forked", reader=f"{sys.executable} {script} {{path}}", preload=("json",), timeout=30.0)
    real = LineReader.line

    def late(self, timeout):  # the peer reads only once the child has long exited and the server answered
        time.sleep(0.5)
        return real(self, timeout)

    monkeypatch.setattr(LineReader, "line", late)
    for _ in range(3):
        started = time.monotonic()
        out, _ = forked._run([sys.executable, str(script), "x"], "reader")
        assert out == b"done\n"
        assert time.monotonic() - started < 10


def test_a_line_reader_hands_out_lines_that_arrived_together(tmp_path):
    from nczarr_conformance.workers import LineReader

    read, write = os.pipe()
    try:
        os.write(write, b'{"pid": 1}\n{"status": 0}\npartial')
        lines = LineReader(read)
        started = time.monotonic()
        assert lines.line(5) == b'{"pid": 1}'
        assert lines.line(5) == b'{"status": 0}'
        assert time.monotonic() - started < 1
        assert lines.line(0.2) is None  # a line not ended yet is waited for, then a timeout
        os.write(write, b" end\n")
        assert lines.line(5) == b"partial end"
        os.close(write)
        write = -1
        assert lines.line(5) == b""  # end of output
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_a_writers_fork_servers_end_with_the_matrix_run(tmp_path, monkeypatch):
    """A writer-only peer's fork servers (its ``preload``) end when the run does, as a reader's ``serve`` workers
    do: each holds an interpreter with the adapter's libraries imported (a VirtualiZarr writer's: about 200 MB),
    which would otherwise live until this process exits, one set per report run."""
    from nczarr_conformance.conformance.cases import BY_ID
    from nczarr_conformance.conformance.matrix import run_matrix
    from nczarr_conformance.peers import command
    from nczarr_conformance.peers.base import registered

    started: list[command._ForkServer] = []

    class Recorded(command._ForkServer):
        def __init__(self, *args: object, **kw: object) -> None:
            super().__init__(*args, **kw)  # type: ignore[arg-type]
            started.append(self)

    monkeypatch.setattr(command, "_ForkServer", Recorded)
    script = tmp_path / "write.py"
    script.write_text("import sys\nprint('this writer writes nothing', file=sys.stderr)\nsys.exit(1)\n")
    writer = CommandPeer("fork-writer", writer=f"{sys.executable} {script} {{model_json}} {{path}}",
                         preload=("json",))
    with registered([writer]):
        run = run_matrix(tmp_path / "m", cases=[BY_ID["scalar"]], peer_ids=["fork-writer", "ours"], jobs=2)
    written = [c for c in run.cells if c.writer == "fork-writer"]
    assert written and all(c.status == "fails" and "this writer writes nothing" in c.message for c in written)
    assert started, "the write did not go through a fork server"
    assert all(server.proc.poll() is not None for server in started)
    assert writer._servers[sys.executable].qsize() == 0


def test_the_exit_hook_ends_every_fork_server_still_running():
    """A run that ends without closing its peers (an error, Ctrl-C) leaves fork servers: the exit hook ends each
    one (it iterates over a copy, as each close takes itself out of the list: over the list itself, every other
    server would live on after the process)."""
    from nczarr_conformance.peers import command

    servers = [command._ForkServer([sys.executable, str(Path(command.__file__).with_name("forkserver.py")), "json"],
                                   dict(os.environ), None) for _ in range(3)]
    try:
        assert all(s.proc.poll() is None for s in servers) and set(servers) <= set(command._SERVERS)
        command._close_servers()
        assert [s.proc.poll() is not None for s in servers] == [True, True, True]
        assert not set(servers) & set(command._SERVERS)
    finally:
        for server in servers:
            server.close()
