"""``nczarr-check URL``: validate a dataset and report findings (docs/contracts/check-report.md).

Exit codes: 0 no errors, 1 at least one error (including "no dataset here"),
2 could not check (bad usage, unreadable or unreachable store).
"""
from __future__ import annotations

import argparse
import sys

from ..check import FLAVOR_CHOICES, check
from .common import Parser, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="nczarr-check", description=__doc__.splitlines()[0])
    p.add_argument("url", help="store path or netcdf-c URL (directory, .zip, s3://…)")
    p.add_argument("--deep", action="store_true", help="also decode every chunk and check its size")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--expect", choices=FLAVOR_CHOICES, help="error unless the dataset has this flavor")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        report = check(args.url, deep=args.deep, expect=args.expect)
        sys.stdout.write(report.render(args.format))
        sys.stdout.flush()
        return report.exit_code

    return run("nczarr-check", body)


if __name__ == "__main__":
    sys.exit(main())
