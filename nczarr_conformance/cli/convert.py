"""``nc2nczarr IN.nc OUT``: convert a netCDF-4 file into an NCZarr store.

Exit codes: 0 converted, 2 could not convert (message on stderr, nothing written).
"""
from __future__ import annotations

import argparse
import sys

from ..convert import convert, total_bytes
from ..nczarr.writer import FLAVOR_ALIASES
from .common import Parser, run


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="nc2nczarr", description=__doc__.splitlines()[0])
    p.add_argument("input", help="netCDF-4 (or netCDF-3) file")
    p.add_argument("output", help="directory, .zip file, or netcdf-c URL (file://…#mode=nczarr,zip, s3://…)")
    p.add_argument("--flavor", default="nczarr", choices=sorted(FLAVOR_ALIASES),
                   help="layout to write: nczarr (netcdf-c ≥ 4.9.3, default), nczarr-2-upper (netcdf-c 4.9.0), zarr")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("--append", metavar="DIM",
                   help="extend the existing store OUTPUT along DIM (an unlimited, or the named, dimension) "
                        "with INPUT's records")
    p.add_argument("--no-direct-copy", action="store_true",
                   help="decode and re-encode every chunk instead of copying compressed HDF5 chunks as they are")
    p.add_argument("--skip-unsupported", action="store_true",
                   help="leave out (with a warning) variables and attributes of compound, vlen, opaque or enum type")
    p.add_argument("--threads", type=int, default=0, help="worker threads (default: 2 per core; 16 for S3)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary")
    p.add_argument("--progress", action="store_true", help="draw the progress bar even when stderr is not a terminal")
    return p


def _return_big_buffers_to_the_os() -> None:
    """glibc keeps freed multi-MB chunk buffers in per-thread arenas; served by mmap they go back at once.

    Keeps peak RSS near the in-flight window instead of growing with every worker thread.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt(-3, 1024 * 1024)  # M_MMAP_THRESHOLD = 1 MiB
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _return_big_buffers_to_the_os()

    def body() -> int:
        if args.append:
            from ..append import append

            stats_a = append(args.input, args.output, args.append)
            if not args.quiet:
                print(f"nc2nczarr: appended {stats_a.records} records along {args.append}: "
                      f"{stats_a.chunks_written} chunks and {stats_a.metadata_written} metadata objects written, {stats_a.seconds:.2f} s", file=sys.stderr)
            return 0
        show = not args.quiet and (args.progress or sys.stderr.isatty())
        bar = None
        if show:
            from tqdm import tqdm

            bar = tqdm(total=total_bytes(args.input), unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                       mininterval=0.5, delay=0 if args.progress else 1.0, dynamic_ncols=True, desc="nc2nczarr")
        done = [0]

        def progress(chunks: int, raw_bytes: int, written: int) -> None:
            if bar is not None:
                done[0] += chunks
                bar.set_postfix_str(f"{done[0]} chunks", refresh=False)
                bar.update(raw_bytes)

        try:
            stats = convert(args.input, args.output, flavor=args.flavor, overwrite=args.overwrite, progress=progress,
                            direct=not args.no_direct_copy, threads=args.threads,
                            skip_unsupported=args.skip_unsupported)
        finally:
            if bar is not None:
                bar.close()
        for warning in stats.warnings:
            print(f"nc2nczarr: warning: {warning}", file=sys.stderr)
        if not args.quiet:
            print(f"nc2nczarr: {stats.objects} objects ({stats.chunks} chunks, {stats.copied} copied compressed), "
                  f"{stats.bytes_in} bytes in, {stats.bytes_out} bytes of chunks out, {stats.seconds:.2f} s",
                  file=sys.stderr)
        return 0

    return run("nc2nczarr", body)


if __name__ == "__main__":
    sys.exit(main())
