"""Every failure the matrix saw a reader of the reader table make on our writers' output was predicted by
nczarr-check (a finding of a rule that speaks of that reader, reader_needs.RULE_PREFIX_READERS), and no warning
predicts a failure where the reader read the store equal (issue 34, Done when).

The readers' outcomes come from reports/interop.json, which real runs of every peer made and which
tests/conformance/test_report.py holds equal to a fresh run; the stores are written again here by our writers
(the same models, the same peers' write) and checked, which needs no peer. INFO findings speak of what the
matrix's view does not compare (a dimension's name), so only warnings and errors count as predicting a failure.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from nczarr_conformance.checker import check
from nczarr_conformance.checker.rules import Severity
from nczarr_conformance.conformance.cases import CASES
from nczarr_conformance.peers import implementations  # noqa: F401  (registers the peers)
from nczarr_conformance.peers.base import PEERS
from nczarr_conformance.reader_needs import READERS, readers_of_rule
from tests.conftest import REPO

OURS = ("ours", "ours-nczarr-2", "ours-nczarr-2-upper", "ours-zarr", "ours-zarr-v3")
#: predictions about xarray's default decoding (masking, NCZarr scalars): the matrix reads xarray raw
#: (decode_cf=False), so its cells cannot show them; tests/test_reader_needs.py holds them to xarray's decoding
DECODED_ONLY = frozenset({"NCZ-INTEROP-XARRAY-FILL", "NCZ-INTEROP-XARRAY-SCALAR", "NCZ-INTEROP-XARRAY-STRINGS",
                          "NCZ-INTEROP-XARRAY-NANATTR", "NCZ-INTEROP-XARRAY-FLOATATTR"})


def _cells() -> list[dict[str, object]]:
    doc = json.loads((REPO / "reports" / "interop.json").read_text(encoding="utf-8"))
    return [c for c in doc["cells"] if c["writer"] in OURS and c["reader"] in READERS and c["status"] != "skipped"]


def test_matrix_failures_on_our_output_are_predicted_and_passes_are_not(tmp_path: Path) -> None:
    cases = {c.id: c for c in CASES}
    findings: dict[tuple[str, str], list[tuple[str, Severity]]] = {}
    unpredicted, mispredicted = [], []
    cells = _cells()
    assert len(cells) > 500  # the matrix is really there
    for cell in cells:
        key = (str(cell["case"]), str(cell["writer"]))
        if key not in findings:
            case = cases[key[0]]
            target = tmp_path / key[0] / key[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                url = PEERS[key[1]].write(case.model(), target, dict(case.options))
            findings[key] = [(f.rule, f.severity) for f in check(url).findings]
        about = [(rule, severity) for rule, severity in findings[key]
                 if cell["reader"] in (readers_of_rule(rule) or ()) and rule not in DECODED_ONLY]
        said = f"{key[0]}: {key[1]} -> {cell['reader']} {cell['status']}"
        if cell["status"] in ("fails", "deviates") and not about:
            unpredicted.append(f"{said}: {cell['message'] or cell['differences']}")
        if cell["status"] == "pass" and any(severity != Severity.INFO for _, severity in about):
            mispredicted.append(f"{said} but predicted {[rule for rule, _ in about]}")
    assert unpredicted == []
    assert mispredicted == []


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_of_the_table_is_a_reader_of_the_matrix(reader: str) -> None:
    """A reader the table speaks for is graded by the matrix (or its toml), so the test above sees its cells."""
    readers = {c["reader"] for c in json.loads((REPO / "reports" / "interop.json").read_text())["cells"]}
    assert reader in readers
