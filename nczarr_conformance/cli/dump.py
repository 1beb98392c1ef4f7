"""``nczarr-dump URL``: print a dataset as CDL text, or as the canonical model (``--json``).

Exit codes: 0 printed, 2 could not read (message on stderr).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..dataset import open_dataset, dataset_name
from ..cdl import to_cdl
from .common import Parser, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="nczarr-dump", description=__doc__.splitlines()[0])
    p.add_argument("url", help="store path or netcdf-c URL (directory, .zip, s3://…), or a netCDF file")
    p.add_argument("--json", action="store_true", help="print the canonical model (docs/contracts/model.md)")
    p.add_argument("--header", "-H", action="store_true", help="leave data out")
    p.add_argument("--storage", action="store_true", help="with --json: add chunks, endianness and filters")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        dataset = open_dataset(args.url, data=not args.header)
        if args.json:
            text = json.dumps(dataset.to_json(data=not args.header, storage=args.storage), ensure_ascii=False,
                              indent=1)
        else:
            text = to_cdl(dataset, dataset_name(args.url), data=not args.header)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return 0

    return run("nczarr-dump", body)


if __name__ == "__main__":
    sys.exit(main())
