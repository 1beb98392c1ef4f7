"""``nczarr-fix URL``: rewrite a store's metadata into the form every chosen reader reads right.

Each fix (``nczarr-fix --list-fixes``) is a small registered function with a stable id that
nczarr-check names beside the findings it cures. Only metadata changes, except where a
reader needs other chunk bytes (TensorStore reads no filters: those arrays are re-encoded).
In place, the fixed store is built aside and swapped in at once (a zip: rewritten and
renamed; S3: one checked batch of PUTs), and the objects it rewrites are saved first in a
backup beside the store (``<store>.nczarr-fix-backup-<UTC time>``; ``--no-backup`` skips
it); ``--out URL2`` writes a fixed copy and leaves the input untouched; ``--dry-run`` prints
the edits as a unified diff per object and writes nothing. Before writing, the store is read
before and after the edits by our reader, zarr-python and netcdf-c; an edit one of them
would read worse is refused.

``--to-v3 [--flavor zarr|nz]`` migrates instead: the metadata of a Zarr v2 store (any NCZarr flavor,
or pure Zarr) rewritten as pure Zarr v3, every chunk kept under its key byte for byte (chunk key
encoding ``v2``), through the fixes' in-place, ``--out`` and ``--dry-run`` paths; what cannot stay
without re-encoding a chunk is refused (docs/nczarr-fix.md).

Exit codes: 0 fixed, or nothing to fix; 1 ``--dry-run`` found edits to make (nothing
written); 2 not done (bad usage, a store that cannot be opened or parsed, an output that
exists or overlaps the input, an edit a reader would read worse, a reader named with --for that the
fixes cannot serve (the line names the conversion flag that would), another writer replacing
the store meanwhile, a failed write; one line on stderr saying what failed, nothing changed).
"""
from __future__ import annotations

import argparse
import sys

from nczarr_conformance.cli.common import Parser, run

READERS = ("zarr-python", "xarray", "tensorstore", "gdal", "netcdf-c-4.9")  # fix.registry.READERS, without its imports


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="nczarr-fix", description=__doc__.split("\n\n")[0].split(": ", 1)[1],
               epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("url", nargs="?", metavar="URL", help="store path or netcdf-c URL (directory, .zip, s3://…)")
    p.add_argument("--out", metavar="URL2", help="write the fixed store here (a new store); the input is only read")
    p.add_argument("--dry-run", action="store_true", help="print the planned edits as a unified diff; write nothing")
    p.add_argument("--for", dest="targets", metavar="READERS",
                   help=f"comma-separated readers to fix for (default: all of {','.join(READERS)})")
    p.add_argument("--no-backup", action="store_true", help="in place: do not keep a backup of the rewritten objects")
    p.add_argument("--to-v3", action="store_true",
                   help="migrate the store to Zarr v3 (metadata only, chunks kept byte for byte) instead of fixing it")
    p.add_argument("--flavor", metavar="FLAVOR", help="with --to-v3: the v3 layout (zarr, the default, or nz)")
    p.add_argument("--list-fixes", action="store_true", help="print every fix: id, readers, what it does")
    return p


def _list_fixes() -> str:
    from nczarr_conformance.fix import FIXES

    lines = []
    for f in FIXES.values():
        cures = f" (cures {', '.join(f.cures)})" if f.cures else ""
        lines.append(f"{f.id} [{','.join(f.readers)}]{cures}: {f.description}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.url and not args.list_fixes:
        parser.error("give a URL, or --list-fixes")
    if args.to_v3 and args.targets:
        parser.error("--for chooses fixes; --to-v3 migrates for every Zarr v3 reader")
    if args.flavor and not args.to_v3:
        parser.error("--flavor goes with --to-v3")
    if args.out and args.no_backup:
        parser.error("--no-backup is for in-place fixes; --out never touches the input")

    def body() -> int:
        if args.list_fixes:
            sys.stdout.write(_list_fixes())
            return 0
        from nczarr_conformance.fix import fix_store

        result = fix_store(args.url, out=args.out, dry_run=args.dry_run, targets=args.targets,
                           backup=not args.no_backup, to_v3=(args.flavor or "zarr") if args.to_v3 else None)
        sys.stdout.write(result.text)
        sys.stdout.flush()
        return 1 if args.dry_run and not result.plan.empty else 0

    return run("nczarr-fix", body)


if __name__ == "__main__":
    from nczarr_conformance.cli.ending import exit_process

    exit_process(main())
