"""Issue #26: a command peer's ``serve`` worker (peers/command.py) answers each read as its one-shot
``reader`` would. Expected values come from the one-shot reader, a process started per store; the worker
must match them store by store, die and time out as honestly, and be replaced when it dies."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from nczarr_conformance.conformance.cases import CASES
from nczarr_conformance.conformance.matrix import _write_one
from nczarr_conformance.peers.base import PEERS
from nczarr_conformance.peers.command import CONFIG_NAME, CommandPeer, build, load_config
from tests.conftest import REPO

#: the committed config's peers that read through a ``serve`` worker
SERVED = ("zarrita", "zarr-python-2.18", "zarr-python-3.4", "netcdf-c-4.9", "ncks")


#: the imports of a Python one-shot reader that the committed config does not preload (zarr-python's read.py,
#: ncks_read.py), loaded once into a fork server for the expected values: each store is still read by a process
#: of its own that has read nothing before (a fork of an interpreter that only imported them, peers/forkserver.py,
#: whose outcomes tests/conformance/test_forkserver.py holds equal to a process started per call), without
#: paying zarr-python's import (~0.5 s) or an interpreter's start fifty times per peer
ONE_SHOT_PRELOAD = {"zarr-python-2.18": ["json", "math", "warnings", "numpy", "zarr"],
                    "zarr-python-3.4": ["json", "math", "warnings", "numpy", "zarr"],
                    "ncks": ["json", "math", "subprocess", "xml.etree.ElementTree"]}


def _configured(peer_id: str, serve: bool) -> CommandPeer:
    spec = dict(load_config(REPO / CONFIG_NAME)[peer_id])
    assert "serve" in spec, f"the committed config declares {peer_id}'s worker"
    if not serve:
        del spec["serve"]
        spec.setdefault("preload", ONE_SHOT_PRELOAD.get(peer_id, []))
    peer = build({peer_id: spec})[0]
    # real programs, real libraries: a missing one is a failure here, never a skip
    assert peer.available() is None, f"{peer_id} cannot run: {peer.available()} (scripts/test installs it)"
    return peer


def _zarrita(serve: bool) -> CommandPeer:
    return _configured("zarrita", serve)


def _outcome(peer: CommandPeer, url: str) -> tuple[str, object, str]:
    try:
        model, detail = peer.read_detailed(url)
    except Exception as exc:
        return f"failed: {exc}", None, str(getattr(exc, "detail", ""))
    return "ok", model.to_json(), detail


def _stores(tmp_path) -> list[str]:
    """Every case as the matrix writes it in Zarr v2 and v3, netcdf-c's corpus, and stores zarrita refuses."""
    from nczarr_conformance.peers import implementations  # noqa: F401  (registers the writers)

    urls = []
    for writer in ("ours-zarr", "ours-zarr-v3", "netcdf-c-corpus"):
        for case in CASES:
            written = _write_one(case, PEERS[writer], None, tmp_path)
            if written.url is not None:
                urls.append(written.url)
    (tmp_path / "not-a-store").mkdir()
    return [*urls, str(tmp_path / "not-a-store"), str(tmp_path / "missing")]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[str]:
    """The stores of _stores, written once for the module: the readers only read them."""
    return _stores(tmp_path_factory.mktemp("served"))


@pytest.mark.parametrize("peer_id", SERVED)
def test_a_configured_worker_answers_every_store_as_its_one_shot_reader(written, peer_id):
    stores = written
    one_shot, served = _configured(peer_id, serve=False), _configured(peer_id, serve=True)
    try:
        failed = unsteady = 0
        for url in stores:
            expected = _outcome(one_shot, url)
            got = _outcome(served, url)
            if got != expected and _outcome(one_shot, url) != expected:
                # the one-shot reader itself answers differently each time: netcdf-c 4.9.0 and ncks read a
                # zlib chunk's compressed bytes and then memory nobody wrote (the matrix's "uninitialised
                # memory"); such a store says nothing about the worker
                unsteady += 1
                continue
            assert got == expected, url
            failed += expected[0] != "ok"
        assert unsteady <= 3
        assert failed >= 2 and len(stores) - failed - unsteady >= 20  # both kinds of answer were compared
        assert served._pool._idle.qsize() == 1  # one worker answered them all, in turn
        if one_shot.preload:  # the one-shot reads were forks of a preloaded interpreter, not the worker
            assert sum(idle.qsize() for idle in one_shot._servers.values()) == 1, "no fork server started"
    finally:
        served.close()
        one_shot.close()


def test_a_killed_zarrita_worker_is_replaced_and_the_next_read_is_right(written):
    stores = written[:3]
    one_shot, served = _zarrita(serve=False), _zarrita(serve=True)
    try:
        assert _outcome(served, stores[0]) == _outcome(one_shot, stores[0])
        worker = served._pool._idle.get_nowait()
        served._pool._idle.put(worker)
        os.kill(worker.proc.pid, signal.SIGKILL)  # a crash between reads
        worker.proc.wait()
        assert _outcome(served, stores[1]) == _outcome(one_shot, stores[1])
        replacement = served._pool._idle.get_nowait()
        served._pool._idle.put(replacement)
        assert replacement is not worker and replacement.alive()
    finally:
        served.close()
    assert not replacement.alive()  # close() ends the run's workers


# a stand-in adapter that can be slow, fail or die on demand, as a one-shot reader and as a worker
FAKE = r'''
import json, os, sys, time

def answer(path):
    what = os.path.basename(path)
    if what == "slow":
        time.sleep(30)
    if what == "crash":
        print("about to crash", file=sys.stderr, flush=True)
        os.kill(os.getpid(), 9)
    if what == "bad":
        return 3, "", "bad store\n"
    root = {"dimensions": {}, "variables": {}, "groups": {}, "attributes": {"seen": {"type": "char", "value": what}}}
    return 0, json.dumps({"model": "nczarr-model/1", "root": root}), ""

if sys.argv[1:] == ["serve"]:
    for line in sys.stdin:
        request = json.loads(line)
        code, out, err = answer(request["path"])
        reply = {"exit": code, "stderr": err} if code else {"stdout": out}
        what = os.path.basename(request["path"])
        if what == "stray":  # a library printing on the worker's stdout
            print("chatter from a library", flush=True)
        if what == "old":  # serve protocol 1: the model itself, no id
            print(out, flush=True)
            continue
        print(json.dumps({"id": request["id"], **reply}), flush=True)
        if what == "twice":  # a reply sent again: it reaches the next read first
            print(json.dumps({"id": request["id"], **reply}), flush=True)
else:
    code, out, err = answer(sys.argv[1])
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.exit(code)
'''


def _fakes(tmp_path) -> tuple[CommandPeer, CommandPeer]:
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    kw = {"reader": f"{sys.executable} {script} {{path}}", "timeout": 2.0, "cwd": tmp_path}
    return CommandPeer("one-shot", **kw), CommandPeer("served", serve=f"{sys.executable} {script} serve", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("what", ["ok", "bad", "slow"])
def test_a_worker_fails_and_times_out_as_the_one_shot_reader(tmp_path, what):
    one_shot, served = _fakes(tmp_path)
    try:
        expected = _outcome(one_shot, str(tmp_path / what))
        started = time.monotonic()
        assert _outcome(served, str(tmp_path / what)) == expected
        assert time.monotonic() - started < 10
        if what == "slow":
            assert expected[0] == "failed: reader timed out after 2 s"
            assert served._pool._idle.qsize() == 0  # the timed-out worker was killed, not kept
        assert _outcome(served, str(tmp_path / "ok"))[0] == "ok"  # and the next read has a worker
    finally:
        served.close()


def test_a_worker_killed_mid_read_fails_that_read_honestly_and_is_replaced(tmp_path):
    one_shot, served = _fakes(tmp_path)
    try:
        assert _outcome(served, str(tmp_path / "first"))[0] == "ok"
        worker = served._pool._idle.get_nowait()
        served._pool._idle.put(worker)
        # killed from outside while it reads a slow store: the read is the worker's death, not an answer
        threading.Timer(0.5, os.kill, (worker.proc.pid, signal.SIGKILL)).start()
        got = _outcome(served, str(tmp_path / "slow"))
        assert got[0] == "failed: reader killed by signal 9: the serve worker ended without a reply"
        # a store that kills the reader: the cell says what a one-shot reader's death says
        assert _outcome(served, str(tmp_path / "crash")) == _outcome(one_shot, str(tmp_path / "crash"))
        assert _outcome(served, str(tmp_path / "after")) == _outcome(one_shot, str(tmp_path / "after"))
        assert served._pool._idle.get_nowait() is not worker
    finally:
        served.close()


def _seen(peer: CommandPeer, url: str) -> str:
    """The store name the reply was about (the fake reader's ``seen`` attribute), or the failure."""
    outcome, model, _ = _outcome(peer, url)
    return model["root"]["attributes"]["seen"]["value"] if model is not None else outcome  # type: ignore[index]


@pytest.mark.parametrize("what", ["stray", "twice", "old"])
def test_a_reply_out_of_step_fails_that_read_only_and_the_next_reads_are_their_own(tmp_path, what):
    """Issue 39 (2): one stray stdout line used to shift every later reply onto the read after it."""
    _, served = _fakes(tmp_path)
    try:
        assert _seen(served, str(tmp_path / "first")) == "first"
        worker = served._pool._idle.get_nowait()
        served._pool._idle.put(worker)
        got = _seen(served, str(tmp_path / what))
        if what == "old":
            assert got.startswith('failed: reader: the serve worker replied without the request\'s "id": '
                                  "since serve protocol 2"), got
        elif what == "stray":
            assert got == ("failed: reader: the serve worker wrote a line that is not a reply "
                           "('chatter from a library'): a stray line on its stdout?"), got
        else:  # the read itself is answered; its second reply fails the next read, which names it
            assert got == "twice"
            got = _seen(served, str(tmp_path / "victim"))
            assert got.startswith("failed: reader: the serve worker replied to request "), got
        assert not worker.alive() or what == "twice"  # the worker out of step was replaced
        for name in ("a", "b", "c"):  # and every later read is graded on its own store
            assert _seen(served, str(tmp_path / name)) == name
    finally:
        served.close()


STRAY_ADAPTER = r'''
import json, os, sys

def main(argv):
    what = os.path.basename(argv[1])
    os.write(1, b"chatter a C library writes on fd 1\n")  # past redirect_stdout: the worker's own stdout
    print("and a Python library on sys.__stdout__", file=sys.__stdout__, flush=True)
    root = {"dimensions": {}, "variables": {}, "groups": {}, "attributes": {"seen": {"type": "char", "value": what}}}
    print(json.dumps({"model": "nczarr-model/1", "root": root}))
    return 0
'''


def test_python_serve_keeps_what_a_library_writes_on_its_stdout_out_of_the_replies(tmp_path):
    """Issue 39 (2), the shipped adapter: what a library writes on file descriptor 1 goes to stderr."""
    script = tmp_path / "chatty.py"
    script.write_text(STRAY_ADAPTER)
    served = CommandPeer("chatty", reader=f"{sys.executable} {script} {{path}}", cwd=tmp_path, timeout=30,
                         serve=f"{sys.executable} {REPO / 'adapters' / 'python_serve.py'} {script} path")
    try:
        for name in ("a", "b", "c"):
            outcome, model, detail = _outcome(served, str(tmp_path / name))
            assert outcome == "ok", (outcome, detail)
            assert model["root"]["attributes"]["seen"]["value"] == name  # type: ignore[index]
            assert "chatter a C library writes on fd 1" in detail
    finally:
        served.close()
