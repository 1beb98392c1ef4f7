"""Issue 39 (3, 4): a command peer's call is bounded in time and in memory whatever the command does.

(3) A reader whose child keeps stdout open in a session of its own used to hold the report for as long as
that child lived (``communicate()`` after the timeout waited for end of output). (4) A reader writing 1.5 GiB
on stderr cost 4.7 GB of report memory, though a cell keeps 4,000 characters of it; stdout had no cap.
Memory is measured in a subprocess (its peak resident size, ``resource.getrusage``), before and after the call.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nczarr_conformance.peers.base import PeerFailed
from nczarr_conformance.peers.command import CommandPeer

#: a reader that starts a child in a session of its own holding its stdout, then outlives the timeout
HOLDS_STDOUT = r'''
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(60)
'''


def test_a_timeout_ends_the_call_even_where_its_child_holds_stdout_open(tmp_path):
    script, pid_file = tmp_path / "holds.py", tmp_path / "child.pid"
    script.write_text(HOLDS_STDOUT)
    peer = CommandPeer("holds", reader=f"{sys.executable} {script} {pid_file} {{path}}", timeout=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(PeerFailed, match=r"^reader timed out after 1 s$"):
            peer.read(str(tmp_path / "store"))
        assert time.monotonic() - started < 20  # not the child's 60 s
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


#: run in a subprocess: the growth of this process's peak resident size across one read of each kind
MEASURE = r'''
import json, resource, sys
from nczarr_conformance.peers.base import PeerFailed
from nczarr_conformance.peers.command import CommandPeer

script, kind = sys.argv[1], sys.argv[2]
reader = f"{sys.executable} {script} {kind} {{path}}"
serve = f"{sys.executable} {script} serve-{kind}" if kind.startswith("served") else None
peer = CommandPeer("loud", reader=reader, serve=serve, timeout=60)
peer.read_detailed  # imports done before the first measure
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    peer.read("/nonexistent/store")
    message, detail = "read", ""
except PeerFailed as exc:
    message, detail = str(exc), exc.detail
peer.close()
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"grown_mib": grown / 1024, "message": message, "detail_chars": len(detail),
                  "detail_end": detail[-40:]}))
'''

#: a reader that is loud: 200 MB on stderr, or stdout without end, one-shot or as a serve worker
LOUD = r'''
import json, sys
MB = b"x" * (1 << 20)

def loud_stderr():
    for _ in range(200):
        sys.stderr.buffer.write(MB)
    sys.stderr.buffer.write(b"\nthe last line\n")
    sys.stderr.flush()

kind = sys.argv[1]
if kind == "stderr":
    loud_stderr()
    sys.exit(3)
if kind == "stdout":
    while True:
        sys.stdout.buffer.write(MB)
for line in sys.stdin:  # a serve worker
    request = json.loads(line)
    if kind == "serve-served-stderr":
        loud_stderr()
        print(json.dumps({"id": request["id"], "exit": 3, "stderr": ""}), flush=True)
    else:
        sys.stdout.write('{"id": %d, "stdout": "' % request["id"])
        while True:
            sys.stdout.write("x" * (1 << 20))
'''


def _measure(tmp_path: Path, kind: str) -> dict[str, object]:
    script = tmp_path / "loud.py"
    script.write_text(LOUD)
    done = subprocess.run([sys.executable, "-c", MEASURE, str(script), kind], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("kind", ["stderr", "served-stderr"])
def test_200_mb_of_stderr_keeps_the_report_small_and_the_cell_keeps_its_end(tmp_path, kind):
    got = _measure(tmp_path, kind)
    assert got["message"] == "reader exit 3: the last line"
    assert got["detail_chars"] == 4000 and got["detail_end"] == "x" * 25 + "\nthe last line\n"
    assert got["grown_mib"] < 50, got  # 200 MB read; ~600 MiB held before the fix


@pytest.mark.parametrize("kind", ["stdout", "served-stdout"])
def test_stdout_past_its_cap_fails_the_cell_and_memory_stays_bounded(tmp_path, kind):
    got = _measure(tmp_path, kind)
    expected = ("reader wrote more than 64 MiB on stdout (the cap of a model's JSON)" if kind == "stdout"
                else "reader: the serve worker's reply is longer than 64 MiB")
    assert got["message"] == expected
    assert got["grown_mib"] < 100, got  # the cap's 64 MiB at most, not the endless output


#: a reader printing the smallest model padded with spaces (JSON's whitespace) to the size it is given
PADDED = r'''
import json, sys
model = json.dumps({"model": "nczarr-model/1",
                    "root": {"dimensions": {}, "variables": {}, "groups": {}, "attributes": {}}}).encode()
sys.stdout.buffer.write(model + b" " * (int(sys.argv[1]) - len(model)))
'''


@pytest.mark.parametrize("extra", [0, 1], ids=["at-the-cap", "one-byte-past"])
def test_the_stdout_cap_is_64_mib_to_the_byte(tmp_path, extra):
    """Issue 39 (4): docs/plugins.md and CHANGELOG.md cap a reader's stdout at 64 MiB. A model of exactly 64 MiB
    is read; one byte more fails the cell saying so (the memory test above would let a cap twice as big pass)."""
    script = tmp_path / "padded.py"
    script.write_text(PADDED)
    peer = CommandPeer("padded", reader=f"{sys.executable} {script} {64 * 1024**2 + extra} {{path}}", timeout=60)
    if extra:
        with pytest.raises(PeerFailed) as caught:
            peer.read(str(tmp_path / "store"))
        assert str(caught.value) == "reader wrote more than 64 MiB on stdout (the cap of a model's JSON)"
    else:
        assert peer.read(str(tmp_path / "store")).root.variables == {}


def test_a_reader_printing_deeply_nested_json_fails_its_cell_naming_the_depth(tmp_path):
    """Python's json parser recursed into it and the cell was graded "RecursionError": now the depth is named."""
    depth = 100_000
    script = tmp_path / "deep.py"
    script.write_text(f"import sys\nsys.stdout.write('[' * {depth} + ']' * {depth})\n")
    peer = CommandPeer("deep", reader=f"{sys.executable} {script} {{path}}", timeout=60)
    with pytest.raises(PeerFailed) as caught:
        peer.read(str(tmp_path / "store"))
    assert str(caught.value) == (f"reader output is JSON nested {depth} levels deep; more than 256 is refused "
                                 "(the canonical model nests far less: docs/contracts/model.md)")
