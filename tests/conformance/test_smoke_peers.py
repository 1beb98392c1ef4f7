"""Every peer at hand, one cell each way: the peer half of the smoke run (``./scripts/test --smoke``).

"Does it work here" for the peers means: each implementation the matrix grades starts, writes or reads, and does
with one case exactly what the committed report says it did (``reports/interop.json``: the pinned versions' real
output). One cell per peer and direction, with ours on the other side (the fastest partner), instead of the whole
matrix ``tests/conformance/test_report.py`` regenerates. The peers are taken from the registry and the committed
``nczarr-conformance.toml``, so a peer added there is smoke-tested without a line here; one missing from the
report fails, naming it.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import one_cell
from nczarr_conformance.peers.base import PEERS, registered
from nczarr_conformance.peers.command import CONFIG_NAME, build, load_config
from tests.conftest import REPO, missing_peer

pytestmark = pytest.mark.smoke

COMMITTED = json.loads((REPO / "reports" / "interop.json").read_text(encoding="utf-8"))
CONFIGURED = load_config(REPO / CONFIG_NAME)
OURS = "ours"
#: cells whose peer-side value is not reproducible (tests/conformance/test_report.py MASKED): never the smoke cell
UNSTABLE_CASES = {"shuffle-zlib"}


def _peer_ids() -> list[str]:
    import nczarr_conformance.conformance.matrix  # noqa: F401  (registers the built-in peers)

    return sorted({*PEERS, *CONFIGURED})


def _pick(peer: str, role: str) -> dict | None:
    """The committed cell that exercises ``peer`` as ``role`` ("writer" or "reader") against ours, preferring a
    pass; None when the report has no such cell that ran (a writer-only or reader-only peer)."""
    other = "reader" if role == "writer" else "writer"
    ran = [c for c in COMMITTED["cells"] if c[role] == peer and c[other] == OURS and c["status"] != "skipped"
           and c["case"] not in UNSTABLE_CASES]
    if peer == OURS:
        ran = [c for c in COMMITTED["cells"] if c["writer"] == c["reader"] == OURS and c["status"] == "pass"]
    ran.sort(key=lambda c: c["status"] != "pass")
    return ran[0] if ran else None


@contextmanager
def _declared(peer: str) -> Iterator[None]:
    """The command peers of nczarr-conformance.toml registered for the cell, as the matrix registers them."""
    if peer in CONFIGURED and peer not in PEERS:
        with registered(build({peer: CONFIGURED[peer]})):
            yield
    else:
        yield


def _run(cell: dict, tmp_path) -> None:
    writer, reader = PEERS[cell["writer"]], PEERS[cell["reader"]]
    for peer in (writer, reader):
        why = peer.available()
        if why:
            missing_peer(f"{peer.id}: {why}")
    got = one_cell(BY_ID[cell["case"]], writer, reader, tmp_path)
    for peer in (writer, reader):
        peer.close()
    where = f"{cell['case']}: {cell['writer']} → {cell['reader']}"
    assert (got.status, got.differences) == (cell["status"], cell["differences"]), (where, got.message)


@pytest.mark.parametrize("peer", _peer_ids())
def test_each_peer_does_with_one_case_what_the_report_says(peer, tmp_path):
    cells = [c for c in (_pick(peer, "writer"), _pick(peer, "reader")) if c is not None]
    cells = [c for i, c in enumerate(cells) if c not in cells[:i]]  # ours: one cell, ours → ours
    assert cells, f"{peer} has no cell with ours in reports/interop.json: regenerate the reports"
    with _declared(peer):
        for i, cell in enumerate(cells):
            (tmp_path / str(i)).mkdir()
            _run(cell, tmp_path / str(i))
