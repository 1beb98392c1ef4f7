"""``nczarr-dump URL``: print a dataset as CDL the way ``ncdump`` does, or as the canonical model (``--json``).

The flags are ncdump's: -h header only, -c coordinate data, -v/-g chosen
variables/groups, -s special attributes (-F: filters as ``_Filter``), -t/-i times as
dates, -p digits, -l line length, -n name, -k kind, -b c|f and -f c|f comments naming
each row or each value (C or Fortran indices); -w, -L N and -Xp are accepted and
change nothing, as in ncdump 4.9.0 on a local file. ``-k`` prints ncdump's one word:
``netCDF-4`` for a store (netcdf-c's ``nc_inq_format`` for NCZarr and Zarr) and
``netCDF-4``, ``classic`` … for a netCDF file. ``-K`` prints the layout instead:
``<mode> <flavor>`` for a store (mode ``nczarr`` or ``zarr``; flavor one of nczarr-v1,
nczarr-2-upper, nczarr-2, nczarr-4.10, zarr, zarr-v3, nz), the data model for a file.
Only the chunks of printed variables are read, a run of chunks at a time. ``-h`` of a
plain local NCZarr directory is read without numpy (cdl/quick_header.py), so it starts
several times faster; anything that reader does not vouch for goes through the full one.

Exit codes: 0 printed, 2 could not read or no such variable/group (message on stderr).
"""
from __future__ import annotations

import os
import sys

from nczarr_conformance.errors import UsageError

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start

if TYPE_CHECKING:  # imported where used: --help and --version load no numpy, netCDF4 or h5py; -h of a plain
    # store loads not even argparse (quick_header)
    import argparse

    from nczarr_conformance.cdl.writer import CdlOptions


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from nczarr_conformance.cli.common import Parser

    class _Annotate(argparse.Action):
        """``-b``/``-f``: each turns its comments on; the language is the last one's (ncdump.c keeps one)."""

        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                     option_string: str | None = None) -> None:
            setattr(namespace, self.dest, True)
            namespace.annotation_lang = values

    p = Parser(prog="nczarr-dump", description=__doc__.splitlines()[0], add_help=False)
    p.add_argument("url", help="store path or netcdf-c URL (directory, .zip, s3://…), or a netCDF file")
    p.add_argument("--help", action="help", help="show this help and exit")
    p.add_argument("-h", "--header", "-H", dest="header", action="store_true", help="header only, no data")
    p.add_argument("-c", dest="coords", action="store_true", help="data of coordinate variables only")
    p.add_argument("-v", dest="variables", metavar="VAR[,…]", help="data of these variables only (x, g/x, /g/x)")
    p.add_argument("-g", dest="groups", metavar="GRP[,…]", help="data of these groups only")
    p.add_argument("-s", dest="specials", action="store_true", help="special virtual attributes (_ChunkSizes …)")
    p.add_argument("-t", dest="times", action="store_true", help="CF time values as ISO dates")
    p.add_argument("-i", dest="iso", action="store_true", help="as -t, with a 'T' between date and time")
    p.add_argument("-k", dest="kind", action="store_true", help="print the kind of dataset (one word) and stop")
    p.add_argument("-K", dest="layout", action="store_true",
                   help="print a store's mode and flavor (nczarr nczarr-4.10 …) and stop")
    p.add_argument("-b", dest="brief", action=_Annotate, choices=("c", "f"), metavar="c|f",
                   help="a comment before each row naming it, with C (0-based) or Fortran (1-based) indices")
    p.add_argument("-f", dest="full", action=_Annotate, choices=("c", "f"), metavar="c|f",
                   help="each value on its own line with a comment naming it (C or Fortran indices)")
    p.add_argument("-F", dest="filter_atts", action="store_true",
                   help="with -s: _Filter for every filter instead of _Fletcher32, _Shuffle, _DeflateLevel")
    p.add_argument("-w", dest="cache", action="store_true", help="accepted (ncdump's DAP caching); no effect")
    p.add_argument("-L", dest="log_level", type=int, metavar="N", help="accepted (ncdump's log level); no effect")
    p.add_argument("-Xp", dest="no_properties", action="store_true",
                   help="accepted; ncdump 4.9.0 prints _NCProperties all the same, and so does this")
    p.add_argument("-p", dest="precision", metavar="F[,D]", help="significant digits of float[, double] data")
    p.add_argument("-l", dest="line_length", type=int, default=80, metavar="LEN", help="data line length (80)")
    p.add_argument("-n", dest="name", help="dataset name on the first line")
    p.add_argument("--anon", action="store_true",
                   help="read s3://, gs://, az:// without credentials (unsigned; netcdf-c's #...&aws.profile=no)")
    p.add_argument("--json", action="store_true", help="print the canonical model (docs/contracts/model.md)")
    p.add_argument("--storage", action="store_true", help="with --json: add chunks, endianness and filters")
    return p


def parse_precision(text: str) -> tuple[int | None, int | None]:
    """``-p F[,D]`` as ncdump 4.9.0's ``set_precision`` reads it (each between 1 and 20).

    ncdump reads the double digits only after float digits: ``-p ,D`` changes nothing (not
    even ``C_format``'s say), and ``-p F,`` is refused as 0 double digits.
    """
    parts = text.split(",")
    if len(parts) > 2:
        raise UsageError(f"-p {text}: expected F or F,D")
    for part in parts[1:] if not parts[0] else parts:
        if not part.isdigit() or not 1 <= int(part) <= 20:
            raise UsageError(f"-p {text}: significant digits must be integers from 1 to 20")
    if not parts[0]:
        return None, None
    return int(parts[0]), (int(parts[1]) if len(parts) > 1 else None)


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n for n in text.split(",") if n) if text else ()


def options_from(args: argparse.Namespace) -> CdlOptions:
    from nczarr_conformance.cdl.writer import CdlOptions

    fd, dd = parse_precision(args.precision) if args.precision else (None, None)
    if args.line_length < 10:
        raise UsageError(f"-l {args.line_length}: line length must be at least 10")
    annotations = None
    if args.full or args.brief:
        from nczarr_conformance.cdl.annotate import Annotations

        annotations = Annotations(brief=bool(args.brief), full=bool(args.full), lang=args.annotation_lang)
    return CdlOptions(header_only=args.header, variables=_names(args.variables), groups=_names(args.groups),
                      coordinates=args.coords, specials=args.specials, times=args.times or args.iso,
                      iso_separator="T" if args.iso else " ", float_digits=fd, double_digits=dd,
                      line_length=args.line_length, filter_atts=args.filter_atts, annotations=annotations)


def _write(text: str) -> None:
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))


def _quick(path: str) -> int | None:
    """``-h`` of a plain local store without numpy or argparse (cdl/quick_header.py), or None to run in full.

    SIGINT and SIGTERM end it as the full command's handlers do (one line, 130 or 143): nothing is written
    before the header is whole, so there is nothing to undo. The handlers are set through ``_signal``, the C
    module ``signal`` wraps: ``signal``'s enums cost enum's import, 1.2 ms of a start measured in milliseconds.
    """
    import _signal

    from nczarr_conformance.cdl.quick_header import quick_header

    def interrupted(signum: int, frame: object) -> None:
        word = "interrupted" if signum == _signal.SIGINT else "terminated by SIGTERM"
        sys.stderr.write(f"nczarr-dump: {word}\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    try:
        for sig in (_signal.SIGINT, _signal.SIGTERM):
            _signal.signal(sig, interrupted)
    except ValueError:  # not the main thread (a test calling main): only the main thread takes handlers
        pass
    text = quick_header(path)
    if text is None:
        return None
    try:
        _write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # a reader that stopped early (| head): as the full command, not an error
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    from nczarr_conformance.cdl.quick_header import header_request

    given = list(sys.argv[1:] if argv is None else argv)
    path = header_request(given)
    if path is not None:
        code = _quick(path)
        if code is not None:
            return code
    from nczarr_conformance.cli.common import run

    args = build_parser().parse_args(given)

    def body() -> int:
        from nczarr_conformance.access.dataset import dataset_name
        from nczarr_conformance.cdl.writer import CdlWriter
        from nczarr_conformance.sources.dump_source import open_source

        options = options_from(args)
        if args.anon:
            from nczarr_conformance.urls import anonymous_url

            args.url = anonymous_url(args.url)
        with open_source(args.url) as source:
            if args.json:
                from nczarr_conformance.cdl.json_dump import write_json

                write_json(source, _write, data=not args.header, storage=args.storage)
                sys.stdout.flush()
                return 0
            if args.kind or args.layout:
                _write((source.layout if args.layout else source.kind) + "\n")
                return 0
            try:
                writer = CdlWriter(source.dataset, _write, options, source.slabs, source.facts)
            except UsageError as exc:
                raise UsageError(f"{args.url}: {exc}") from exc
            writer.dump(args.name or dataset_name(args.url))
        sys.stdout.flush()
        return 0

    return run("nczarr-dump", body)


if __name__ == "__main__":
    from nczarr_conformance.cli.ending import exit_process

    exit_process(main())
