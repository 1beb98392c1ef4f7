"""Run control and feedback (issue #24): subsets, cells in parallel, a progress bar on a terminal only, and
spec rules chosen by capability, never by an implementation's id."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import time

import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import run_matrix
from nczarr_conformance.conformance.rules import SPEC_RULES, RuleContext
from nczarr_conformance.model import Dataset
from nczarr_conformance.peers.base import PEERS, Peer, registered
from tests.conftest import REPO


class AnyNameReader(Peer):
    """A netCDF reader under an id no list in the package knows: ours underneath."""

    reads = True
    capabilities = frozenset({"nczarr", "attributes"})

    def __init__(self, peer_id: str, caps: frozenset[str]) -> None:
        self.id, self.name, self.capabilities = peer_id, peer_id, caps

    def read(self, url: str) -> Dataset:
        return open_dataset(url)


@pytest.mark.parametrize("rule_id", ["D.read.1", "D.read.4"])
def test_reading_rules_grade_any_reader_that_declares_nczarr(rule_id, tmp_path):
    """Before: rules graded only ids in a hard-coded set, so any other reader got "not-applicable"."""
    run = run_matrix(tmp_path / "m", cases=[], peer_ids=["ours"])
    ctx = RuleContext(run)
    rule = next(r for r in SPEC_RULES if r.id == rule_id)
    speaker = AnyNameReader("someone-elses-reader", frozenset({"nczarr", "attributes"}))
    assert rule.evaluate(ctx, speaker)[0] == "follows"
    pure = AnyNameReader("someone-elses-zarr-reader", frozenset({"attributes"}))
    assert rule.evaluate(ctx, pure) == ("not-applicable", ("not a netCDF reader: attribute types are not part of "
                                                          "what it returns"))


def _cells(run):
    return [(c.case, c.writer, c.reader, c.status, c.differences, c.message, c.detail) for c in run.cells]


def test_jobs_give_the_same_cells_in_the_same_order(tmp_path):
    """Threads change the order cells finish in, never the report: every field of every cell, in order."""
    cases = [BY_ID[c] for c in ("scalar", "string-var", "char-var", "shuffle-zlib", "fill-partial")]
    peers = ["ours", "ours-zarr", "netcdf-c-4.10", "zarr-python", "xarray"]
    timings = {}
    runs = {}
    for jobs in (1, 2):
        started = time.perf_counter()
        runs[jobs] = run_matrix(tmp_path / f"j{jobs}", cases=cases, peer_ids=peers, jobs=jobs)
        timings[jobs] = time.perf_counter() - started
    assert _cells(runs[1]) == _cells(runs[2])
    assert len(runs[1].cells) == len(cases) * 4 * 5 and set(runs[1].seen) == set(runs[2].seen)
    print(f"jobs=1 {timings[1]:.1f} s, jobs=2 {timings[2]:.1f} s")
    # the rules over a run, on one thread and on two: the same results, in the same order
    from nczarr_conformance.conformance.rules import evaluate_rules

    one, two = evaluate_rules(runs[1], jobs=1), evaluate_rules(runs[1], jobs=2)
    assert [r.to_json() for r in one] == [r.to_json() for r in two]
    assert len(one) > 20 and {r.status for r in one} >= {"follows", "not-applicable"}


def test_a_peer_registered_for_a_run_is_gone_after_it():
    peer = AnyNameReader("passing-through", frozenset())
    with registered([peer]):
        assert PEERS["passing-through"] is peer and peer.source == "tests.conformance.test_run_control"
    assert "passing-through" not in PEERS


def _report(*args: str, cwd, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.report", "report", *args], cwd=cwd,
                          env=env, text=True, timeout=240, check=False, **kw)


def test_peers_and_cases_choose_the_cells_and_rules_the_results(tmp_path):
    # our store writers (ours-references is graded by tests/conformance/test_reference_writers.py)
    done = _report("--out", "out", "--peers", "ours,ours-nczarr-*,ours-zarr*", "--cases", "char-*,scalar",
                   "--rules", "E.*",
                   cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]
    interop = json.loads((tmp_path / "out" / "interop.json").read_text())
    assert [i["id"] for i in interop["implementations"]] == ["ours", "ours-nczarr-2", "ours-nczarr-2-upper",
                                                             "ours-zarr", "ours-zarr-v3"]
    assert [c["id"] for c in interop["cases"]] == ["char-var", "scalar", "char-attr-json-number",
                                                   "char-attr-json-object", "char-attr-text"]
    assert len(interop["cells"]) == 5 * 5 * 1  # five writers, one reader (only ours reads of these)
    skipped = [c for c in interop["cells"] if c["status"] == "skipped"]
    assert [(c["case"], c["writer"]) for c in skipped] == [("scalar", "ours-nczarr-2-upper")]  # it cannot express it
    rules = json.loads((tmp_path / "out" / "rules.json").read_text())
    assert [r["id"] for r in rules["rules"]] == ["E.char", "E.string", "E.maxstrlen"]
    assert {r["rule"] for r in rules["results"]} == {"E.char", "E.string", "E.maxstrlen"}
    # no bar off a terminal, and the closing lines
    assert "\r" not in done.stderr and "cell/s" not in done.stderr
    assert done.stderr.splitlines()[-2:] == [
        ("nczarr-conformance: summary: 25 cells, 24 run: 24 passed, 0 deviate, 0 fail, 0 known peer faults; "
        "1 skipped: 0 for a missing tool, 1 not applicable"),
        "nczarr-conformance: rules: 15 rule results: 2 follow, 0 deviate, 9 not applicable, 4 skipped"]


def test_a_terminal_gets_a_progress_bar_one_step_per_cell(tmp_path):
    """stderr on a pseudo-terminal (as a user's): tqdm's bar counts the cells up to the total."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # as a terminal window is
    try:
        proc = subprocess.Popen([sys.executable, "-m", "nczarr_conformance.cli.report", "report", "--out", "out",
                                 "--peers", "ours", "--cases", "scalar,string-var", "--rules", "E.char"],
                                cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
                                    "PYTHONPATH", "")])})
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the pty closed: the command is done
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(timeout=120) == 0, seen[-2000:]
    finally:
        os.close(leader)
    text = seen.decode("utf-8", "replace")
    assert "nczarr-conformance:" in text and "2/2" in text and "cell" in text, text[-2000:]
    assert "scalar: ours → ours" in text or "string-var: ours → ours" in text


def test_one_cell_is_the_matrix_cell(tmp_path):
    """The seam a test-per-case runner uses: the same cell as the whole matrix's."""
    from nczarr_conformance.conformance.matrix import one_cell

    cases = [BY_ID["scalar"], BY_ID["string-var"]]
    run = run_matrix(tmp_path / "m", cases=cases, peer_ids=["ours", "ours-nczarr-2-upper"])
    reader = AnyNameReader("no-strings", frozenset({"nczarr", "attributes", "scalars"}))
    for case in cases:
        for writer in ("ours", "ours-nczarr-2-upper"):
            cell = one_cell(case, PEERS[writer], PEERS["ours"], tmp_path / "one")
            assert _cells(run)[[c[:3] for c in _cells(run)].index((case.id, writer, "ours"))] == _cells(
                type(run)([], [cell], {}, tmp_path))[0]
    skipped = one_cell(BY_ID["string-var"], PEERS["ours"], reader, tmp_path / "one")
    assert (skipped.status, skipped.message) == ("skipped", "no-strings does not declare strings (its capabilities)")


def test_a_documented_deviation_is_named_only_where_the_rule_deviates(tmp_path):
    """rules._evaluate: the "documented deviation" wording goes on a deviation listed for that rule and
    implementation, never on one that is not listed, nor on a listed pair that follows."""
    import types

    from nczarr_conformance.conformance import rules

    run = run_matrix(tmp_path, cases=[BY_ID["scalar"]], peer_ids=["ours"], jobs=1)
    ctx = rules.RuleContext(run)
    ours = PEERS["ours"]
    listed_id = next(rule for rule, peer in rules.DOCUMENTED_DEVIATIONS if peer == "ours")

    def rule(rule_id: str, status: str) -> object:
        return types.SimpleNamespace(id=rule_id, evaluate=lambda ctx, peer: (status, "seen"))

    assert rules._evaluate(ctx, rule("not-listed", "deviates"), ours).evidence == "seen"  # type: ignore[arg-type]
    assert rules._evaluate(ctx, rule(listed_id, "follows"), ours).evidence == "seen"  # type: ignore[arg-type]
    listed = rules._evaluate(ctx, rule(listed_id, "deviates"), ours)  # type: ignore[arg-type]
    assert listed.evidence.startswith("documented deviation, ") and listed.evidence.endswith(". Seen: seen")
