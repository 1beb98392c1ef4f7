"""``nczarr-check URL...``: validate datasets and report findings (docs/contracts/check-report.md).

Exit codes: 0 no finding at the --fail-on level or above, 1 at least one (including "no
dataset here"), 2 could not check (bad usage, a store that cannot be opened, a netCDF file
or a Zarr v3 store). With several URLs each gets its report and the exit code is the worst.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nczarr_conformance.cli.common import Parser, run
from nczarr_conformance.errors import NczarrError, StoreError
from nczarr_conformance.flavor_names import CHECK_FLAVORS as FLAVOR_CHOICES

if TYPE_CHECKING:  # imported where used: --help and --version load no numpy
    from nczarr_conformance.checker.report import Report


def _ids(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def check(url: str, **options: Any) -> Report:
    """nczarr_conformance.checker.check, imported on first use (the rules load numpy and numcodecs)."""
    from nczarr_conformance.checker import check as check_url

    return check_url(url, **options)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="nczarr-check", description=__doc__.splitlines()[0])
    p.add_argument("urls", nargs="*", metavar="URL", help="store path or netcdf-c URL (directory, .zip, s3://…)")
    p.add_argument("--deep", action="store_true", help="also decode every chunk and check its size")
    p.add_argument("--anon", action="store_true",
                   help="read s3://, gs://, az:// without credentials (unsigned; netcdf-c's #...&aws.profile=no)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --deep: decode the chunks on this dask.distributed cluster (same report)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="with --deep: decode the chunks on a local cluster of N worker processes (same report)")
    p.add_argument("--format", choices=("text", "json", "html", "sarif", "junit"), default="text",
                   help="text (default); json: one report object, an array for several URLs; html: one page; "
                        "sarif: SARIF 2.1.0; junit: JUnit XML, a testcase per rule")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report(s) to FILE instead of stdout")
    p.add_argument("--expect", choices=FLAVOR_CHOICES, help="error unless the dataset has this flavor")
    p.add_argument("--select", type=_ids, default=[], metavar="ID,...",
                   help="report only these rules (ids or prefixes such as NCZ-INTEROP-C490)")
    p.add_argument("--ignore", type=_ids, default=[], metavar="ID,...", help="leave these rules (or prefixes) out")
    p.add_argument("--fail-on", choices=("error", "warning", "info"), default="error",
                   help="exit 1 when a finding at this severity or above remains (default: error)")
    p.add_argument("--for", dest="for_readers", metavar="READER,...",
                   help="keep only the predictions about these readers (every other rule stays): "
                        "ours, netcdf-c-4.10, netcdf-c-4.9, zarr-python, xarray, xarray-datatree, tensorstore, gdal")
    p.add_argument("--readers", action="store_true",
                   help="also try each reader (--for's, else every one installed) for real: open the store and read "
                        "its arrays, shown beside what the findings predict (a card: who can open this store)")
    p.add_argument("--list-rules", action="store_true", help="print every rule: id, severity, what, source")
    return p


def _write(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{output}: cannot write the report: {exc.strerror}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.urls and not args.list_rules:
        parser.error("give at least one URL, or --list-rules")
    if (args.scheduler or args.workers) and not args.deep:
        parser.error("--scheduler and --workers go with --deep (only chunk decoding is distributed)")

    readers: list[str] = []
    if args.for_readers:
        from nczarr_conformance.reader_needs import parse_readers

        try:
            readers = parse_readers(args.for_readers)
        except ValueError as exc:
            parser.error(str(exc))

    def body() -> int:
        from nczarr_conformance.checker.docs import render_list
        from nczarr_conformance.checker.plugins import load_rule_plugins
        from nczarr_conformance.urls import anonymous_url

        if args.anon:
            args.urls = [anonymous_url(url) for url in args.urls]

        load_rule_plugins()  # rules of other distributions (entry points): listed and run like ours
        if args.list_rules:
            _write(render_list(args.format), args.output)
            return 0
        if args.scheduler or args.workers:
            from nczarr_conformance.conversion.cluster import open_client

            with open_client(args.scheduler, args.workers) as client:
                return check_all(client)
        return check_all(None)

    def check_all(client: Any) -> int:
        from nczarr_conformance.checker.report import render_reports
        from nczarr_conformance.checker.rules import Severity

        reports: list[Report] = []
        worst = 0
        for url in args.urls:
            try:
                report = check(url, deep=args.deep, expect=args.expect, select=args.select, ignore=args.ignore,
                               fail_on=Severity(args.fail_on), client=client, for_readers=readers or None)
                if args.readers:
                    report.readers = _card(url, report, readers)
            except NczarrError as exc:
                if len(args.urls) == 1:
                    raise
                print(f"nczarr-check: {exc}", file=sys.stderr)  # the other URLs are still checked
                worst = max(worst, exc.exit_code)
                continue
            reports.append(report)
            worst = max(worst, report.exit_code)
        if reports:
            _write(render_reports(reports, args.format), args.output)
        return worst

    return run("nczarr-check", body)


def _card(url: str, report: Report, named: list[str]) -> list[dict[str, Any]]:
    """Each reader tried for real (conformance/verify.py, the matrix's peers) beside the findings about it."""
    from nczarr_conformance.conformance.verify import can_open
    from nczarr_conformance.reader_needs import READERS, readers_of_rule

    card = []
    for verdict in can_open(url, named or list(READERS)):
        about = sorted({f.rule for f in report.findings if verdict.reader in (readers_of_rule(f.rule) or ())})
        card.append({"reader": verdict.reader, "predicted": ", ".join(about) if about else "opens",
                     "tried": {"opens": "opens", "fails": "fails", "absent": "not installed"}.get(verdict.status,
                                                                                                verdict.status),
                     "said": verdict.said if verdict.status != "opens" else ""})
    return card


if __name__ == "__main__":
    from nczarr_conformance.cli.ending import exit_process

    exit_process(main())
