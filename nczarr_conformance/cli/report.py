"""``nczarr-conformance report [--out reports/]``: run the interoperability matrix and the spec rules.

Writes interop.{json,md,html} and rules.{json,md,html} (docs/contracts/interop-report.md), and with
``--junit FILE`` that run as JUnit XML. Any implementation joins through ``--reader``/``--writer``
commands, a TOML file or an entry point (docs/plugins.md). Ends with a summary on stderr: cells run,
passed, known peer faults, skipped (each missing tool named).

Exit codes: 0 written (whatever the peers did, unless ``--fail-on``), 1 our own implementation deviates
(ours → ours, a rule of ours, or ours doing worse than a peer in any cell: conformance/gate.py), or with
``--fail-on fail|deviate`` a graded implementation fails (or deviates) against the reference, 2 could not
run (bad usage, a plugin that fails to load, a duplicate id), 3 ``--fail-on-skip`` and some cell or rule was
skipped because a tool is missing.

Graded implementations are the ones from outside that run (``--reader``/``--writer``, the TOML file, entry
points). ``--fail-on`` judges each against the reference, as the pytest plugin does: its cells reading a
store of ours or netcdf-c's corpus, writing one that ours reads, or both sides its own. ``fail``: such a
cell fails (the command exits non-zero, times out, or writes nothing); ``deviate``: such a cell fails or
reads other values, or a spec rule grades it ``deviates``. A listed known fault excuses its cell.
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nczarr_conformance.cli.common import Parser, run
from nczarr_conformance.errors import UsageError

if TYPE_CHECKING:  # imported where used: --help loads no numpy
    from nczarr_conformance.conformance.matrix import Cell
    from nczarr_conformance.peers.base import Peer

EXIT_SKIPPED = 3
#: --fail-on's levels: the cell statuses (and for deviate, the rule status) that fail a graded implementation
FAIL_ON = ("fail", "deviate")
#: writers whose stores are the reference a graded reader is judged on (the pytest plugin's read tests)
REFERENCE_WRITERS = ("netcdf-c-corpus",)


def build_parser() -> Parser:
    p = Parser(prog="nczarr-conformance", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="run every writer × reader and every spec rule; write the reports")
    report.add_argument("--out", default="reports", help="directory for the six report files")
    report.add_argument("--keep", action="store_true", help="keep the stores the peers wrote (printed path)")
    joins = report.add_argument_group("implementations from outside (docs/plugins.md)")
    joins.add_argument("--reader", action="append", default=[], metavar="NAME='CMD'",
                       help="a reader command: placeholders {url} {path} {zip} {out_json} (without {out_json}: "
                            "the model JSON on stdout)")
    joins.add_argument("--writer", action="append", default=[], metavar="NAME='CMD'",
                       help="a writer command: placeholders {model_json} {path} {url} {zip} {options}")
    joins.add_argument("--caps", action="append", default=[], metavar="NAME=CAP,…",
                       help="what NAME declares it can do (see --list-caps; default: all)")
    joins.add_argument("--config", metavar="FILE",
                       help="a TOML file of [implementations.NAME] tables (default: ./nczarr-conformance.toml if "
                            "there is one)")
    joins.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                       help="per call of a --reader/--writer command (default 120)")
    joins.add_argument("--list-caps", action="store_true", help="print the capability vocabulary and exit")
    subset = report.add_argument_group("what runs")
    subset.add_argument("--peers", action="append", default=[], metavar="GLOB,…",
                        help="only these implementations (ids, glob patterns); --reader/--writer ones always run")
    subset.add_argument("--cases", action="append", default=[], metavar="GLOB,…", help="only these cases")
    subset.add_argument("--rules", action="append", default=[], metavar="GLOB,…", help="only these spec rules")
    subset.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="run N cells at a time (threads; default: one per core)")
    results = report.add_argument_group("results")
    results.add_argument("--junit", metavar="FILE", help="also write the run as JUnit XML")
    results.add_argument("--fail-on", choices=FAIL_ON, metavar="fail|deviate",
                         help="exit 1 when an implementation from outside fails (fail) or fails or deviates "
                              "(deviate) against the reference: a cell with ours or netcdf-c's corpus on the "
                              "other side, or a spec rule")
    results.add_argument("--fail-on-skip", action="store_true",
                         help=f"exit {EXIT_SKIPPED} when a cell or a rule was skipped because a tool is missing")
    return p


def own_deviations(run: Any, results: list[Any], *, complete: bool = True) -> list[str]:
    """Our implementation must never deviate: a cell ours→ours or a rule result of ours that is not clean, or a
    cell where ours does worse than a peer that is not a listed peer fault with its evidence holding.
    ``complete=False`` (a subset run): what a listed entry or deviation names may not have run, so none is
    called stale."""
    from nczarr_conformance.conformance.gate import explain, is_ours

    bad = [f"{c.case}: {c.writer} → {c.reader} {c.status}" for c in run.cells
           if is_ours(c.writer) and c.reader == "ours" and c.status in ("deviates", "fails")]
    from nczarr_conformance.conformance.rules import DOCUMENTED_DEVIATIONS

    bad += [f"{r.rule}: {r.implementation} {r.status}" for r in results
            if is_ours(r.implementation) and r.status == "deviates"
            and (r.rule, r.implementation) not in DOCUMENTED_DEVIATIONS]
    listed = {(r.rule, r.implementation): r.status for r in results}
    if complete:
        bad += [f"{rule}: {impl} is listed as a documented deviation but {listed.get((rule, impl), 'absent')}"
                for rule, impl in DOCUMENTED_DEVIATIONS if listed.get((rule, impl)) not in ("deviates", "skipped")]
    return bad + explain(run, complete=complete)[0]


def graded_failures(run: Any, results: list[Any], graded: set[str], level: str,
                    known: dict[tuple[str, str, str], str]) -> list[str]:
    """What fails a graded implementation under ``--fail-on level``, one line each: its cells against the
    reference (a store of ours or the corpus read, a store read by ours, or itself on both sides) whose status
    is ``fails`` (or, for ``deviate``, also ``deviates``), and for ``deviate`` its spec rules that deviate."""
    from nczarr_conformance.conformance.gate import is_ours

    def reference(peer: str, side: str) -> bool:
        return is_ours(peer) if side == "reader" else is_ours(peer) or peer in REFERENCE_WRITERS

    statuses = ("fails",) if level == "fail" else ("fails", "deviates")
    bad = [f"{c.case}: {c.writer} → {c.reader} {c.status}" for c in run.cells
           if c.status in statuses and (c.case, c.writer, c.reader) not in known
           and ((c.reader in graded and (c.writer == c.reader or reference(c.writer, "writer")))
                or (c.writer in graded and reference(c.reader, "reader")))]
    if level == "deviate":
        bad += [f"{r.rule}: {r.implementation} {r.status}" for r in results
                if r.implementation in graded and r.status == "deviates"]
    return bad


def _patterns(values: list[str]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def _chosen(patterns: list[str], ids: list[str], what: str, option: str) -> list[str]:
    """The ids matching any glob; a pattern matching none is a usage error naming the known ids."""
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(i, pattern) for i in ids):
            raise UsageError(f"{option} {pattern!r} matches no {what}; known: {', '.join(ids)}")
    return [i for i in ids if any(fnmatch.fnmatchcase(i, p) for p in patterns)]


def _columns() -> int:
    """The terminal's width; a terminal that reports none (0: a fresh pseudo-terminal) gets 100, where tqdm
    would draw nothing at all."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or 100
    except OSError:
        return 100


class _Bar:
    """A progress bar, one step per cell, on a terminal only (tqdm writes nothing when stderr is not one)."""

    def __init__(self) -> None:
        self.bar: Any = None

    def start(self, total: int) -> None:
        from tqdm import tqdm

        on_terminal = sys.stderr.isatty()
        self.bar = tqdm(total=total, unit="cell", file=sys.stderr, disable=not on_terminal, desc="nczarr-conformance",
                        ncols=_columns() if on_terminal else None)

    def advance(self, cell: Cell) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"{cell.case}: {cell.writer} → {cell.reader}", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _outside_peers(args: argparse.Namespace) -> tuple[list[Peer], set[str]]:
    """Every peer from outside this package: entry points, the config file, the command line; and the
    ids declared on the command line (they run whatever --peers says)."""
    from nczarr_conformance.peers.command import (
        build,
        find_config,
        from_command_line,
        load_config,
    )
    from nczarr_conformance.peers.plugins import load_peer_plugins

    config = find_config(args.config)
    specs = load_config(config) if config is not None else {}
    flags = from_command_line(args.reader, args.writer, args.caps, args.timeout)
    declared = {name for name, spec in flags.items() if "reader" in spec or "writer" in spec}
    return [*load_peer_plugins(), *build(specs, overrides=flags)], declared


def _list_caps() -> int:
    from nczarr_conformance.peers.capabilities import CONVENTIONS, FEATURES

    titles = ("features (a case needs them)", "conventions (how a cell compares, which spec rules apply)")
    for title, table in zip(titles, (FEATURES, CONVENTIONS), strict=True):
        print(f"{title}:")
        for name, meaning in table.items():
            print(f"  {name:<12} {meaning}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.jobs is None:  # the cells wait on peer processes and netCDF4's lock: a thread per core keeps them busy
        args.jobs = os.cpu_count() or 1
    if args.jobs < 1:
        build_parser().error(f"--jobs must be at least 1, not {args.jobs}")

    def body() -> int:
        if args.list_caps:
            return _list_caps()
        from nczarr_conformance.checker.plugins import load_rule_plugins
        from nczarr_conformance.peers import implementations  # noqa: F401  (registers the built-in peers)
        from nczarr_conformance.peers.base import PEERS, registered

        load_rule_plugins()  # check rules of other distributions: a clash is refused here, naming both
        outside, declared = _outside_peers(args)
        with registered(outside):
            from nczarr_conformance.conformance.gate import known_entries

            known_entries()  # every declared known fault checked before the run: a bad one is one line, exit 2
            chosen = [pid for pid in PEERS if not args.peers or pid in declared
                      or pid in _chosen(_patterns(args.peers), list(PEERS), "implementation", "--peers")]
            graded = {peer.id for peer in outside} & set(chosen)
            if args.fail_on and not graded:
                raise UsageError(f"--fail-on {args.fail_on}: no implementation from outside runs to grade "
                                 "(--reader, --writer, a [implementations.NAME] table or an entry point)")
            return _report(args, chosen, graded)

    return run("nczarr-conformance", body)


def _report(args: argparse.Namespace, peer_ids: list[str], graded: set[str]) -> int:
    from nczarr_conformance.conformance import matrix as matrix_module
    from nczarr_conformance.conformance.cases import CASES
    from nczarr_conformance.conformance.gate import known_faults
    from nczarr_conformance.conformance.junit import junit_xml
    from nczarr_conformance.conformance.render import write_reports
    from nczarr_conformance.conformance.rules import evaluate_rules, select_rules
    from nczarr_conformance.conformance.summary import MAX_FINDINGS, summarize

    case_ids = _chosen(_patterns(args.cases), [c.id for c in CASES], "case", "--cases") if args.cases else None
    try:
        rules = select_rules(_patterns(args.rules))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    complete = not (args.peers or args.cases or args.rules)
    workdir = Path(tempfile.mkdtemp(prefix="ncz-matrix-"))
    bar = _Bar()
    try:
        try:
            matrix = matrix_module.run_matrix(workdir, cases=[c for c in CASES if case_ids is None or c.id in case_ids],
                                              peer_ids=peer_ids, jobs=args.jobs, progress=bar)
        finally:
            bar.close()
        results = evaluate_rules(matrix, rules, jobs=args.jobs)
        known = known_faults(matrix)  # a subset run marks only those whose evidence ran too
        for path in write_reports(matrix, results, Path(args.out), known=known):
            print(path)
        if args.junit:
            Path(args.junit).parent.mkdir(parents=True, exist_ok=True)
            Path(args.junit).write_text(junit_xml(matrix, results, known), encoding="utf-8")
            print(args.junit)
        # while the stores exist: some evidence reads them again
        bad = own_deviations(matrix, results, complete=complete)
        failing = graded_failures(matrix, results, graded, args.fail_on, known) if args.fail_on else []
    finally:
        if args.keep:
            print(f"stores kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summary = summarize(matrix, results, known)
    for line in summary.findings[:MAX_FINDINGS]:
        print(f"nczarr-conformance: {line}", file=sys.stderr)
    if len(summary.findings) > MAX_FINDINGS:
        print(f"nczarr-conformance: … and {len(summary.findings) - MAX_FINDINGS} more findings "
              f"(see {args.out}/interop.html)", file=sys.stderr)
    print(f"nczarr-conformance: summary: {summary.line()}", file=sys.stderr)
    print(f"nczarr-conformance: rules: {summary.rules_line()}", file=sys.stderr)
    for line in bad:
        print(f"nczarr-conformance: our implementation deviates: {line}", file=sys.stderr)
    for line in failing:
        print(f"nczarr-conformance: --fail-on {args.fail_on}: {line}", file=sys.stderr)
    if bad or failing:
        return 1
    if args.fail_on_skip and (summary.skipped_missing or summary.rules_missing):
        print(f"nczarr-conformance: --fail-on-skip: {summary.skipped_missing} cells and {summary.rules_missing} "
              f"rule results skipped for a missing tool", file=sys.stderr)
        return EXIT_SKIPPED
    return 0


if __name__ == "__main__":
    from nczarr_conformance.cli.ending import exit_process

    exit_process(main())
