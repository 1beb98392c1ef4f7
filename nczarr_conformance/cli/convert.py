"""``nc2nczarr IN.nc OUT``: convert a netCDF-4 file into an NCZarr store.

Takes nccopy's transforms (-d -s -c -M -u -V -G, same syntax and rules, see
conversion/transforms.py) and ``--compressor`` for the other codecs netcdf-c reads.
``--concat DIM`` writes many files into one store along DIM on dask.distributed (conversion/concat.py).
``--zarr-format 3`` writes Zarr v3 (``--flavor zarr``, xarray's layout; ``nczarr-v3-draft``, netcdf-c PR #3068's
unmerged draft layout; ``nz``, the NZ-1.0 proposal), ``--shard N`` N chunks per shard object;
``--append`` onto a v3 store and ``--zarr-format 3 --concat`` run in this process (conversion/append_v3.py).
Exit codes: 0 converted, 2 could not convert or bad usage (one line on stderr, nothing written).
"""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from nczarr_conformance.cli.common import Parser, run
from nczarr_conformance.flavor_names import (
    CHAR_AS_CHOICES,
    FLAVOR_ALIASES,
    JSON_ATTRIBUTE_MODES,
    V3_FLAVORS,
    shard_refusal,
)

#: the reader ids of reader_needs.READERS, for --help without importing the table's dependencies (none: it is data)
READER_IDS = ("ours", "netcdf-c-4.10", "netcdf-c-4.9", "zarr-python", "xarray", "xarray-datatree", "tensorstore",
              "gdal")

if TYPE_CHECKING:  # imported where used: --help and --version load no numpy, netCDF4 or h5py
    from nczarr_conformance.conversion.audience import Audience
    from nczarr_conformance.conversion.concat import FilesDone
    from nczarr_conformance.conversion.transforms import Transforms


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="nc2nczarr", description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="+", metavar="INPUT",
                   help="netCDF-4 (or netCDF-3) file; with --concat or --append, several files or quoted glob patterns")
    p.add_argument("output", help="directory, .zip file, or netcdf-c URL (file://…#mode=nczarr,zip, s3://…)")
    p.add_argument("--flavor", default=None, choices=sorted({*FLAVOR_ALIASES, *V3_FLAVORS}),
                   help="layout to write: nczarr (netcdf-c ≥ 4.9.3, default), nczarr-2 (netcdf-c 4.9.1–4.9.2), "
                        "nczarr-2-upper (netcdf-c 4.9.0), zarr; with --zarr-format 3: zarr (xarray's and "
                        "zarr-python 3's layout, the default; nczarr-v3-draft: netcdf-c PR #3068's draft; "
                        "nz is not written yet)")
    p.add_argument("--zarr-format", type=int, choices=(2, 3), default=2,
                   help="2 (default) or 3: Zarr v3 (zarr.json, dimension_names), what xarray and zarr-python 3 "
                        "write by default; no released netcdf-c reads it")
    p.add_argument("--shard", type=int, metavar="N",
                   help="with --zarr-format 3: shards of N chunks along the first dimension (sharding_indexed), "
                        "one object per shard instead of one per chunk")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("--append", metavar="DIM",
                   help="extend the existing store OUTPUT along DIM (an unlimited, or the named, dimension) "
                        "with INPUT's records; several INPUT files (or patterns) are ordered, checked and written "
                        "as --concat does, on dask.distributed (a Zarr v3 store: in this process, one transaction)")
    p.add_argument("--concat", metavar="DIM",
                   help="write the INPUT files (a list, or quoted glob patterns such as 'archive/*.nc') into one "
                        "store along DIM, ordered by their DIM coordinate values; every file is checked first (as "
                        "--append does: overlaps, gaps, differing variables are refused) and converted in parallel "
                        "on dask.distributed; the metadata is written last (with --zarr-format 3: in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --concat/--append: an existing dask.distributed scheduler "
                        "(its workers must see the files)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="with --concat/--append: a local cluster of N worker processes (default: one per core)")
    p.add_argument("--allow-gaps", action="store_true",
                   help="with --concat/--append: accept a step between files larger than 1.5 times the usual step")
    p.add_argument("--no-direct-copy", action="store_true",
                   help="decode and re-encode every chunk instead of copying compressed HDF5 chunks as they are")
    p.add_argument("--skip-unsupported", action="store_true",
                   help="leave out (with a warning) variables and attributes of compound, vlen, opaque or enum type, "
                        "and HDF5 objects netCDF-4 hides, misreads or crashes on (float16, bitfield, reference, "
                        "array and time types, zero-length attributes, filters its HDF5 lacks); what holds no "
                        "variable's values (named datatypes, attributes netCDF-4 keeps to itself) is named in one "
                        "warning line with or without this option")
    p.add_argument("--json-attributes", choices=JSON_ATTRIBUTE_MODES, default="lossless",
                   help="char attributes whose text parses as JSON: lossless (default) writes the text as a JSON "
                        "string, which every reader gives back exactly; spec writes it as that JSON value "
                        "(nczarr.md Appendix D case 3), which netcdf-c 4.10.1 reads back as one character "
                        "(_Unsigned=\"true\" -> \"1\", so ubyte data read signed) and Zarr readers as a number")
    c = p.add_mutually_exclusive_group()
    c.add_argument("--no-consolidate", dest="consolidate", action="store_false", default=None,
                   help="do not write the consolidated .zmetadata (written last by default, so xarray opens the "
                        "store without a warning and S3 readers need one GET for all metadata; left out by default "
                        "when a char array is >S1, because zarr-python then refuses the whole group through it)")
    c.add_argument("--consolidate", dest="consolidate", action="store_true", default=None,
                   help="write .zmetadata even when a char array is >S1")
    p.add_argument("--char-as", choices=CHAR_AS_CHOICES,
                   help="char variables' dtype: >S1 (nczarr default, nczarr.md Appendix E: netcdf-c reads char, "
                        "zarr-python 3 and xarray refuse the dataset) or S1 (|S1, zarr default: zarr-python, "
                        "xarray, TensorStore read it, netcdf-c reads strings)")
    p.add_argument("--threads", type=int, default=0, help="threads reading and encoding chunks (default: 2 per core); "
                        "S3 uploads run in a pool of their own, 16 PUTs at once")
    t = p.add_argument_group("nccopy's transforms (re-encode only the variables they change)")
    t.add_argument("-d", metavar="0-9", dest="deflate",
                   help="deflate (zlib) level for every variable; 0: no compression")
    t.add_argument("-s", dest="shuffle", action="store_true",
                   help="shuffle before compressing (with -d or --compressor)")
    t.add_argument("-c", metavar="CHUNKSPEC", dest="chunkspecs", action="append",
                   help="chunking as nccopy: dim/n,dim/n (dim/ = whole length; /g/dim/n in a group), "
                        "/ (unchunk all), var:n1,...,nn, var: (no chunking); repeatable")
    t.add_argument("-M", metavar="BYTES", dest="min_chunk_bytes",
                   help="variables whose chunks would hold fewer bytes stay unchunked (nccopy: 8192)")
    t.add_argument("-u", dest="fix_unlimited", action="store_true", help="make unlimited dimensions fixed")
    t.add_argument("-V", metavar="VAR,...", dest="variables",
                   help="only these variables (name or /path; all dimensions and groups stay)")
    t.add_argument("-G", metavar="GRP,...", dest="groups", help="only these groups (and the root)")
    t.add_argument("--compressor", metavar="CODEC",
                   help="instead of -d: zlib:L, zstd:L, bz2:L, blosc:CNAME:L[:SHUFFLE] or none")
    r = p.add_argument_group("the readers the store is written for (docs/readers.md)")
    r.add_argument("--for", dest="for_readers", metavar="READER,...",
                   help="write the layout these readers read equal to the source (Zarr format, flavor, char dtype, "
                        "filters, compression, the zip's entries), chosen before writing; where they conflict, "
                        "each reader's loss is said first; with --concat, only --reference (planned from the first "
                        "file along DIM). Readers: " + ", ".join(READER_IDS))
    r.add_argument("--prefer", metavar="READER,...",
                   help="with --for: where the named readers conflict, these readers' needs win (default: the "
                        "order --for names them)")
    r.add_argument("--accept-losses", action="store_true",
                   help="with --reference --for: write the references even where a named reader would still read "
                        "some object otherwise than the file (each is named; refused without this)")
    r.add_argument("--verify", action="store_true",
                   help="after writing, open the output with each reader (--for's, else every one of the list "
                        "that is installed) and print one line per reader; exit 1 when a named reader, or one the "
                        "conversion said reads it, does not read it equal to the source")
    p.add_argument("--anon", action="store_true",
                   help="with --reference of an s3:// input: read it unsigned, a public bucket (netcdf-c's "
                        "#...&aws.profile=no); the references record it, so readers read it unsigned too")
    p.add_argument("--reference", action="store_true",
                   help="write no chunk: OUTPUT (.json: kerchunk JSON, .parq: kerchunk Parquet) holds the NCZarr "
                        "metadata with each chunk a reference into INPUT (docs/references.md); what cannot be "
                        "referenced is inlined up to a bound or refused by name; with --concat DIM, one reference "
                        "store over every INPUT file; icechunk://PATH: a new Icechunk repository (Zarr v3, "
                        "virtual chunks, one commit; with --concat DIM, into every INPUT file)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary")
    p.add_argument("--progress", action="store_true", help="draw the progress bar even when stderr is not a terminal")
    return p


def _return_big_buffers_to_the_os(to_s3: bool = False) -> None:
    """glibc keeps freed multi-MB chunk buffers in per-thread arenas; served by mmap they go back at once.

    Keeps peak RSS near the in-flight window instead of growing with every worker thread.
    To S3, where every chunk waits in memory for its PUT, two arenas instead (M_ARENA_MAX):
    freed buffers are reused rather than mapped and faulted in afresh (measured on the 400 MB
    benchmark file: 0.4 s less system time, ~0.6 s less wall time), and peak RSS stays near
    the upload budget all the same (250-265 MB there, 173 MB on 7300 small chunks).
    """
    import ctypes

    try:
        # the process's own symbols, libc's among them: ctypes.util.find_library("c") would run
        # ``ldconfig -p`` in a child process (~20 ms of every conversion) to name the library already loaded
        libc = ctypes.CDLL(None)
        if to_s3:
            libc.mallopt(-8, 2)  # M_ARENA_MAX
        else:
            libc.mallopt(-3, 1024 * 1024)  # M_MMAP_THRESHOLD = 1 MiB
    except (OSError, AttributeError):
        pass


def _is_s3(url: str) -> bool:
    from nczarr_conformance.errors import UsageError
    from nczarr_conformance.urls import parse

    try:
        return parse(url).kind == "s3"
    except UsageError:
        return False  # reported by the conversion itself


def _transforms(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Transforms | None:
    """The transforms asked for, or a usage error (one line, exit 2) naming the bad spec."""
    from nczarr_conformance.conversion.transforms import TransformError, parse

    try:
        t = parse(deflate=args.deflate, shuffle=args.shuffle, chunkspecs=args.chunkspecs,
                  min_chunk_bytes=args.min_chunk_bytes, fix_unlimited=args.fix_unlimited, variables=args.variables,
                  groups=args.groups, compressor=args.compressor)
    except TransformError as exc:
        parser.error(str(exc))
    if t.empty and not t.shuffle:  # nothing asked; a lone -s changes nothing either, as in nccopy
        return None
    if args.append:
        parser.error("--append extends a store as it is; it takes no -d/-s/-c/-M/-u/-V/-G/--compressor")
    return t


def main(argv: list[str] | None = None) -> int:
    """Everything inside :func:`run`, the parsing too: its signal handlers are in place from the
    first moment, so an early Ctrl-C is one line and exit 130 like a late one."""
    return run("nc2nczarr", lambda: _interruptible(argv))


def _interruptible(argv: list[str] | None) -> int:
    """:func:`_main`, where an error a signal caused is reported as that signal.

    A Ctrl-C landing inside an import of a C extension comes out as that import's error
    (numpy: "Importing the numpy C-extensions failed"), which the CLI would call a bug.
    """
    from nczarr_conformance import safety

    try:
        return _main(argv)
    except Exception:
        safety.raise_if_interrupted()
        raise


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    transforms = _transforms(parser, args)
    no_shards = shard_refusal(args.zarr_format, args.shard)  # the library's rule, said as a usage error
    if no_shards is not None:
        parser.error(no_shards)
    if args.zarr_format == 3 and args.concat and (args.scheduler or args.workers):
        parser.error("--concat --zarr-format 3 runs in this process: it takes no --scheduler or --workers")
    if args.flavor in V3_FLAVORS and args.flavor not in FLAVOR_ALIASES and args.zarr_format != 3:
        parser.error(f"--flavor {args.flavor} is a Zarr v3 layout: give --zarr-format 3")
    if args.append and (args.char_as or args.consolidate is not None):
        parser.error("--append keeps the store's layout: it takes no --char-as, --consolidate or --no-consolidate "
                     "(.zmetadata is updated when the store has one)")
    if args.concat and args.append:
        parser.error("--concat writes a new store, --append extends one: give one of them")
    if not args.concat and not args.append and len(args.input) > 1:
        parser.error("several inputs need --concat DIM (or --append DIM)")
    if (args.scheduler or args.workers) and not (args.concat or args.append):
        parser.error("--scheduler and --workers go with --concat or --append")
    many = bool(args.concat) or (bool(args.append) and (len(args.input) > 1 or bool(args.scheduler or args.workers)))
    if args.concat and transforms is not None:
        parser.error("--concat copies the files' layout as it is; it takes no -d/-s/-c/-M/-u/-V/-G/--compressor")
    if args.verify and (args.append or args.concat):
        parser.error("--verify goes with a conversion of one file (--concat: verify a file converted with --for, "
                     "then --append)")
    if (args.for_readers or args.prefer) and (args.append or (args.concat and not args.reference)):
        parser.error("--for and --prefer go with a conversion of one file or --concat --reference (--append keeps "
                     "the store's layout; --concat: convert with --for, then --append)")
    if args.accept_losses and not (args.reference and args.for_readers):
        parser.error("--accept-losses goes with --reference --for (a copy for --for is written and its losses said)")
    if args.prefer and not args.for_readers:
        parser.error("--prefer chooses among the readers of --for: give --for")
    readers = _readers(parser, args.for_readers, "--for")
    prefer = _readers(parser, args.prefer, "--prefer")
    if not set(prefer) <= set(readers):
        parser.error(f"--prefer {','.join(prefer)}: name readers of --for ({','.join(readers)})")
    if not many:
        args.input = args.input[0]
    if args.anon:
        from nczarr_conformance.stores.s3_object import is_s3_url
        from nczarr_conformance.urls import anonymous_url

        if not (args.reference and not args.concat and is_s3_url(args.input)):
            parser.error("--anon goes with --reference of one s3:// input (a public bucket, read unsigned)")
        args.input = anonymous_url(args.input)
    if args.reference:
        return _reference(parser, args, transforms)
    _return_big_buffers_to_the_os(to_s3=_is_s3(args.output))

    def body() -> int:
        from nczarr_conformance.nczarr.attrs import json_attributes

        with json_attributes(args.json_attributes):
            return convert_or_append()

    def concat_v3() -> int:
        from nczarr_conformance import safety
        from nczarr_conformance.conversion.append_v3 import concat_v3
        from nczarr_conformance.conversion.concat import expand_inputs

        files = expand_inputs(args.input)
        stats_v, warnings = concat_v3(files, args.output, args.concat, overwrite=args.overwrite,
                                      allow_gaps=args.allow_gaps, shard=args.shard, consolidate=args.consolidate,
                                      flavor=args.flavor or "zarr")
        safety.raise_if_interrupted()
        for warning in warnings:
            print(f"nc2nczarr: warning: {warning}", file=sys.stderr)
        if not args.quiet:
            print(f"nc2nczarr: {len(files)} files, {stats_v.records} records along {args.concat}: "
                  f"{stats_v.objects_written} objects (Zarr v3), {stats_v.seconds:.2f} s", file=sys.stderr)
        return 0

    def convert_or_append() -> int:
        from nczarr_conformance import safety
        from nczarr_conformance.conversion.from_netcdf import convert, total_bytes

        if many and args.concat and args.zarr_format == 3:
            return concat_v3()
        if many:
            from nczarr_conformance.conversion.concat import concat

            files_bar = _FilesBar(args.progress) if not args.quiet and (args.progress or sys.stderr.isatty()) else None
            try:
                stats_c = concat(args.input, args.output, args.concat or args.append, flavor=args.flavor or "nczarr",
                                 overwrite=args.overwrite, scheduler=args.scheduler, workers=args.workers,
                                 direct=not args.no_direct_copy, allow_gaps=args.allow_gaps, append=bool(args.append),
                                 consolidate=args.consolidate, char_as=args.char_as,
                                 progress=files_bar.update if files_bar is not None else None)
            finally:
                if files_bar is not None:
                    files_bar.close()
            safety.raise_if_interrupted()  # a signal deferred through the commit: its one line, no summary
            if not args.quiet:
                print(f"nc2nczarr: {stats_c.files} files, {stats_c.records} records "
                      f"{'appended ' if args.append else ''}along {args.concat or args.append}: "
                      f"{stats_c.objects} objects ({stats_c.chunks} chunks, {stats_c.copied} copied compressed), "
                      f"{stats_c.seconds:.2f} s", file=sys.stderr)
            return 0
        if args.append:
            from nczarr_conformance.conversion.append import append

            stats_a = append(args.input, args.output, args.append, allow_gaps=args.allow_gaps)
            safety.raise_if_interrupted()
            if not args.quiet:
                print(f"nc2nczarr: appended {stats_a.records} records along {args.append}: "
                      f"{stats_a.chunks_written} chunks and {stats_a.metadata_written} metadata objects written, "
                      f"{stats_a.seconds:.2f} s", file=sys.stderr)
            return 0
        show = not args.quiet and (args.progress or sys.stderr.isatty())
        bar = None
        if show:
            from tqdm import tqdm

            total = total_bytes(args.input, flavor=args.flavor, transforms=transforms, char_as=args.char_as,
                                skip_unsupported=args.skip_unsupported, zarr_format=args.zarr_format,
                                shard=args.shard)  # what progress() adds up
            bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                       mininterval=0.5, delay=0 if args.progress else 1.0, dynamic_ncols=True, desc="nc2nczarr")
        done = [0]

        def progress(chunks: int, raw_bytes: int, written: int) -> None:
            if bar is not None:
                done[0] += chunks
                bar.set_postfix_str(f"{done[0]} chunks", refresh=False)
                bar.update(raw_bytes)

        try:
            stats = convert(args.input, args.output, flavor=args.flavor, overwrite=args.overwrite, progress=progress,
                            direct=not args.no_direct_copy, threads=args.threads, transforms=transforms,
                            skip_unsupported=args.skip_unsupported, consolidate=args.consolidate,
                            char_as=args.char_as, zarr_format=args.zarr_format, shard=args.shard,
                            for_readers=readers or None, prefer=prefer or None, announce=announce)
        finally:
            if bar is not None:
                bar.close()
        safety.raise_if_interrupted()
        for warning in stats.warnings:
            print(f"nc2nczarr: warning: {warning}", file=sys.stderr)
        if not args.quiet:
            if stats.audience is not None:
                print(f"nc2nczarr: {stats.audience.readable_line()}", file=sys.stderr)
            print(f"nc2nczarr: {stats.objects} objects ({stats.chunks} chunks, {stats.copied} copied compressed), "
                  f"{stats.bytes_in} bytes in, {stats.bytes_out} bytes of chunks out, {stats.seconds:.2f} s",
                  file=sys.stderr)
        if args.verify and stats.audience is not None:
            return _verify(args.input, args.output, transforms, stats.audience, readers)
        return 0

    def announce(audience: Audience) -> None:
        """Before anything is written: what --for chose and which reader loses what (said even with -q)."""
        lines = audience.plan_lines()
        if not args.quiet or any(" loses: " in line for line in lines):
            for line in lines:
                print(f"nc2nczarr: {line}", file=sys.stderr)

    return body()


def _reference(parser: argparse.ArgumentParser, args: argparse.Namespace, transforms: Transforms | None) -> int:
    """``--reference``: kerchunk references instead of a store (conversion/references.py)."""
    if args.concat:
        return _reference_concat(parser, args, transforms)
    taken = [name for name, given in (("--append", args.append), ("transforms", transforms),
                                      ("--zarr-format 3", args.zarr_format == 3),
                                      ("--no-direct-copy", args.no_direct_copy)) if given]
    if taken:
        parser.error(f"--reference writes one file's references as it is stored: it takes no {', '.join(taken)}")
    from nczarr_conformance import safety
    from nczarr_conformance.conversion.icechunk_references import (
        convert_icechunk_references,
        is_icechunk_output,
    )
    from nczarr_conformance.conversion.references import convert_references

    if is_icechunk_output(args.output):  # Zarr v3 with HDF5's codecs: no NCZarr flavor, no char dtype to choose
        taken = [name for name, given in (("--flavor", args.flavor), ("--char-as", args.char_as),
                                          ("--for", args.for_readers)) if given]
        if taken:
            parser.error(f"--reference into an Icechunk repository writes Zarr v3: it takes no {', '.join(taken)}"
                         f"{_V2_ONLY if args.for_readers else ''}")
        stats = convert_icechunk_references(args.input, args.output, overwrite=args.overwrite,
                                            consolidate=args.consolidate, skip_unsupported=args.skip_unsupported)
    else:
        if args.for_readers and (args.flavor or args.char_as):
            parser.error("--for chooses the flavor and char dtype: give no --flavor or --char-as with it")
        stats = convert_references(args.input, args.output, flavor=args.flavor, overwrite=args.overwrite,
                                   char_as=args.char_as, consolidate=args.consolidate,
                                   skip_unsupported=args.skip_unsupported,
                                   for_readers=_readers(parser, args.for_readers, "--for") or None,
                                   prefer=_readers(parser, args.prefer, "--prefer") or None,
                                   accept_losses=args.accept_losses)
    safety.raise_if_interrupted()
    for warning in stats.warnings:
        print(f"nc2nczarr: warning: {warning}", file=sys.stderr)
    lines = stats.audience.plan_lines() if stats.audience is not None else []
    for line in lines:  # who still loses what, where (said even with -q)
        if not args.quiet or " loses: " in line:
            print(f"nc2nczarr: {line}", file=sys.stderr)
    if not args.quiet:
        print(f"nc2nczarr: {stats.objects} objects ({stats.copied} chunks referenced in {args.input}, "
              f"{stats.bytes_out} bytes of chunks inline), {stats.seconds:.2f} s", file=sys.stderr)
    return 0


#: why an Icechunk repository takes no --for
_V2_ONLY = (" (--for plans a Zarr v2 layout: flavor, char dtype, default fill; write kerchunk references, .json or "
            ".parq, for it)")


def _reference_concat(parser: argparse.ArgumentParser, args: argparse.Namespace,
                      transforms: Transforms | None) -> int:
    """``--concat DIM --reference``: one reference store over many files (conversion/reference_concat.py)."""
    taken = [name for name, given in (("transforms", transforms), ("--zarr-format 3", args.zarr_format == 3),
                                      ("--no-direct-copy", args.no_direct_copy)) if given]
    if taken:
        parser.error(f"--concat --reference references the files as they are stored: it takes no {', '.join(taken)}")
    from nczarr_conformance import safety
    from nczarr_conformance.conversion.icechunk_references import is_icechunk_output
    from nczarr_conformance.conversion.reference_concat import concat_references

    if is_icechunk_output(args.output):  # Zarr v3 with HDF5's codecs, as for one file
        taken = [name for name, given in (("--flavor", args.flavor), ("--char-as", args.char_as),
                                          ("--for", args.for_readers)) if given]
        if taken:
            parser.error(f"--reference into an Icechunk repository writes Zarr v3: it takes no {', '.join(taken)}"
                         f"{_V2_ONLY if args.for_readers else ''}")
    elif args.for_readers and (args.flavor or args.char_as):
        parser.error("--for chooses the flavor and char dtype: give no --flavor or --char-as with it")

    stats = concat_references(args.input, args.output, args.concat, flavor=args.flavor, overwrite=args.overwrite,
                              char_as=args.char_as, consolidate=args.consolidate,
                              skip_unsupported=args.skip_unsupported, allow_gaps=args.allow_gaps,
                              scheduler=args.scheduler, workers=args.workers,
                              for_readers=_readers(parser, args.for_readers, "--for") or None,
                              prefer=_readers(parser, args.prefer, "--prefer") or None,
                              accept_losses=args.accept_losses)
    safety.raise_if_interrupted()
    for warning in stats.warnings:
        print(f"nc2nczarr: warning: {warning}", file=sys.stderr)
    for line in stats.audience.plan_lines() if stats.audience is not None else []:
        if not args.quiet or " loses: " in line:  # who still loses what, where (said even with -q), as for one file
            print(f"nc2nczarr: {line}", file=sys.stderr)
    if not args.quiet:
        print(f"nc2nczarr: {stats.files} files, {stats.records} records along {args.concat}: {stats.objects} objects "
              f"({stats.referenced} chunks referenced, {stats.inline_bytes} bytes of chunks inline), "
              f"{stats.seconds:.2f} s", file=sys.stderr)
    return 0


def _readers(parser: argparse.ArgumentParser, text: str | None, option: str) -> list[str]:
    """The reader ids ``text`` names (``a,b``), or a usage error naming the known ones."""
    if not text:
        return []
    from nczarr_conformance.reader_needs import parse_readers

    try:
        return parse_readers(text, where=option)
    except ValueError as exc:
        parser.error(str(exc))


def _verify(src: str, url: str, transforms: Transforms | None, audience: Audience, named: list[str]) -> int:
    """Open ``url`` with each reader (the named ones, else every reader of the table) and compare it with
    netCDF4-python's reading of ``src``: one line per reader; 1 when a named reader, or one the conversion
    said reads the store, does not read it equal."""
    import copy

    from nczarr_conformance.conformance.verify import verify
    from nczarr_conformance.conversion.transforms import apply
    from nczarr_conformance.reader_needs import READERS, readable_by
    from nczarr_conformance.sources import netcdf4 as nc4

    intended = nc4.read(src)
    if transforms is not None:
        intended = copy.deepcopy(intended)
        apply(transforms, intended, src)
    ids = named or list(READERS)
    promised = set(named) | set(readable_by(audience.layout, ids)[0])
    status = 0
    for verdict in verify(url, intended, ids, source=src if transforms is None else None):
        print(f"nc2nczarr: verify: {verdict.line()}", file=sys.stderr)
        if verdict.reader in promised and verdict.status in ("differs", "fails"):
            status = 1
    return status


class _FilesBar:
    """``--concat``/multi-file ``--append`` progress on stderr: files and bytes checked, then written.

    One tqdm bar per phase: the checks read every file before any chunk is written, so one
    bar would run to its end twice.
    """

    def __init__(self, forced: bool) -> None:
        self.forced = forced
        self.phase = ""
        self.bar: Any = None

    def update(self, done: FilesDone) -> None:
        if done.phase != self.phase:
            self.close()
            from tqdm import tqdm

            self.phase = done.phase
            self.bar = tqdm(total=done.bytes_total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                            mininterval=0.5, delay=0 if self.forced else 1.0, dynamic_ncols=True,
                            desc=f"nc2nczarr: {'checked' if done.phase == 'check' else 'written'}")
        self.bar.set_postfix_str(f"{done.files}/{done.files_total} files", refresh=False)
        self.bar.update(done.bytes - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


if __name__ == "__main__":
    from nczarr_conformance.cli.ending import exit_process

    exit_process(main())
