"""``nczarr-conformance report [--out reports/]``: run the interoperability matrix and the spec rules.

Writes interop.{json,md,html} and rules.{json,md,html} (docs/contracts/interop-report.md).
Exit codes: 0 written (whatever the peers did), 1 our own implementation deviates (ours → ours, a rule of
ours, or ours doing worse than a peer in any cell: conformance/gate.py), 2 could not run.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from nczarr_conformance.cli.common import Parser, run


def build_parser() -> Parser:
    p = Parser(prog="nczarr-conformance", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="run every writer × reader and every spec rule; write the reports")
    report.add_argument("--out", default="reports", help="directory for the six report files")
    report.add_argument("--keep", action="store_true", help="keep the stores the peers wrote (printed path)")
    return p


def own_deviations(run: Any, results: list[Any]) -> list[str]:
    """Our implementation must never deviate: a cell ours→ours or a rule result of ours that is not clean, or a
    cell where ours does worse than a peer that is not a listed peer fault with its evidence holding."""
    from nczarr_conformance.conformance.gate import explain, is_ours

    bad = [f"{c.case}: {c.writer} → {c.reader} {c.status}" for c in run.cells
           if is_ours(c.writer) and c.reader == "ours" and c.status in ("deviates", "fails")]
    from nczarr_conformance.conformance.rules import DOCUMENTED_DEVIATIONS

    bad += [f"{r.rule}: {r.implementation} {r.status}" for r in results
            if is_ours(r.implementation) and r.status == "deviates"
            and (r.rule, r.implementation) not in DOCUMENTED_DEVIATIONS]
    listed = {(r.rule, r.implementation): r.status for r in results}
    bad += [f"{rule}: {impl} is listed as a documented deviation but {listed.get((rule, impl), 'absent')}"
            for rule, impl in DOCUMENTED_DEVIATIONS if listed.get((rule, impl)) not in ("deviates", "skipped")]
    return bad + explain(run)[0]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from nczarr_conformance.conformance.matrix import run_matrix
        from nczarr_conformance.conformance.render import write_reports
        from nczarr_conformance.conformance.rules import evaluate_rules

        workdir = Path(tempfile.mkdtemp(prefix="ncz-matrix-"))
        try:
            matrix = run_matrix(workdir)
            results = evaluate_rules(matrix)
            for path in write_reports(matrix, results, Path(args.out)):
                print(path)
            bad = own_deviations(matrix, results)  # while the stores exist: some evidence reads them again
        finally:
            if args.keep:
                print(f"stores kept in {workdir}", file=sys.stderr)
            else:
                shutil.rmtree(workdir, ignore_errors=True)
        for line in bad:
            print(f"nczarr-conformance: our implementation deviates: {line}", file=sys.stderr)
        return 1 if bad else 0

    return run("nczarr-conformance", body)


if __name__ == "__main__":
    sys.exit(main())
