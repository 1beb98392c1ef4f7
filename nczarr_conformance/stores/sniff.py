"""Recognise what a URL names when it is not a store, so a failure can say what to do instead.

A netCDF file handed to nczarr-check or a GRIB file handed to nczarr-dump would otherwise fail
as "not a directory" or "no dataset here"; these checks name the thing and the fix in one line
(a Zarr v3 store is read: ``zarr3.reader.open_reader`` takes it when a root ``zarr.json`` is
there). Every command asks here (one wording): nc2nczarr, ``--append``/``--concat`` and
``nczarr-dump IN.nc`` through sources/netcdf4.py's ``open_nc`` (:func:`foreign_file_error`
before netCDF4-python opens a file, :func:`plain_hdf5_error` when it could not), nczarr-check,
nczarr-fix and ``open`` through :func:`netcdf_file_error`, and nc2nczarr's output through
:func:`output_error`.

What is recognised, by its first bytes: GRIB (``GRIB``), HDF4 (``0e 03 13 01``), text (CDL
when it reads ``netcdf NAME {``), HDF5 (its signature at 0, 512, 1024… bytes: a user block
moves it) and among HDF5 files those that are not netCDF-4 (no ``_NCProperties`` attribute
and no dimension scale, looked at with h5py).
"""
from __future__ import annotations

import os
import re
import stat

from nczarr_conformance.errors import FormatError, NczarrError, NoDatasetError, UsageError
from nczarr_conformance.stores.base import Store
from nczarr_conformance.urls import StoreSpec, parse

NETCDF_MAGIC = (b"\x89HDF", b"CDF\x01", b"CDF\x02", b"CDF\x05")
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
GRIB_MAGIC = b"GRIB"  # GRIB editions 1 and 2 (WMO FM 92) start with it
HDF4_MAGIC = b"\x0e\x03\x13\x01"  # HDF4's "magic cookie" (DFH_MAGIC)
#: an output path with one of these endings names a netCDF/HDF5 file: nc2nczarr writes a store
FILE_ENDINGS = (".nc", ".nc4", ".h5", ".hdf5")
_SNIFF_BYTES = 4096
_CDL = re.compile(r"\A\s*(?://[^\n]*\n\s*)*netcdf\s+\S+\s*\{")


def special_file(path: str) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a directory: "FIFO", "character
    device", "block device", "socket". Opening one to sniff it, or netCDF4 opening it, waits for a writer
    (a FIFO) or reads without end (a device): such a path is refused by name before anything opens it."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else special_kind(mode)


def special_kind(mode: int) -> str:
    """The name of a file type that is not a regular file (an ``st_mode``): how refusals name it."""
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def is_netcdf_file(path: str) -> bool:
    """netCDF-4 (HDF5) or netCDF classic/64-bit/CDF5 magic at the start of a regular file."""
    if not os.path.isfile(path):  # a FIFO's open would wait for a writer
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head in NETCDF_MAGIC


def _head(path: str) -> bytes:
    """The first bytes of a regular file (never opened otherwise: a FIFO would wait for a writer)."""
    if not os.path.isfile(path):
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.read(_SNIFF_BYTES)
    except OSError:
        return b""


def is_hdf5(path: str) -> bool:
    """The HDF5 signature at offset 0, 512, 1024, 2048… (a user block moves it), in a regular file."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            offset = 0
            while offset + len(HDF5_SIGNATURE) <= size:
                fh.seek(offset)
                if fh.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                    return True
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return False
    return False


def _text(head: bytes) -> str | None:
    """``head`` as text when it is text (UTF-8, no NUL, not empty; a character cut at the end is allowed)."""
    if not head or b"\0" in head:
        return None
    for cut in range(4):
        try:
            return head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def what_file(path: str) -> str | None:
    """What a regular file that is no netCDF file is, in words, or None (a netCDF file, a zip, unknown bytes)."""
    head = _head(path)
    if head.startswith(GRIB_MAGIC):
        return "GRIB file"
    if head.startswith(HDF4_MAGIC):
        return "HDF4 file"
    if head[:4] in NETCDF_MAGIC or is_hdf5(path):  # a user block before HDF5 may be text
        return None
    text = _text(head)
    if text is not None:
        return "CDL text" if _CDL.match(text) else "text file"
    return None


#: what to do with each kind of file nothing here reads
_WHAT_TO_DO = {
    "GRIB file": "convert it to netCDF-4 first (ecCodes: grib_to_netcdf -k 4 -o OUT.nc IN; or cdo -f nc4 copy IN "
                 "OUT.nc; or xarray with cfgrib), then nc2nczarr OUT.nc",
    "HDF4 file": "netCDF-4 is HDF5, and the netcdf-c here reads no HDF4: convert it first (h4toh5 IN OUT.h5, or "
                 "gdal_translate -of netCDF -co FORMAT=NC4), then nc2nczarr",
    "CDL text": "make the netCDF file first: ncgen -k nc4 -o OUT.nc IN, then nc2nczarr OUT.nc",
    "text file": "nc2nczarr and nczarr-dump read netCDF-3 and netCDF-4/HDF5 files, nczarr-dump and nczarr-check "
                 "NCZarr stores",
}


def foreign_file_error(path: str, url: str | None = None) -> NczarrError | None:
    """The one-line error for a GRIB, HDF4 or text file, or a FIFO or device, where a netCDF file or a store
    is expected, else None."""
    special = special_file(path)
    if special is not None:
        return FormatError(f"{url or path}: a {special}, not a netCDF file or an NCZarr store (a regular file or "
                           "a directory is read)")
    what = what_file(path)
    if what is None:
        return None
    return FormatError(f"{url or path}: {what}, not netCDF or an NCZarr store: {_WHAT_TO_DO[what]}")


def plain_hdf5(path: str) -> bool:
    """An HDF5 file that is not netCDF-4: no ``_NCProperties`` attribute on its root and no dimension scale
    anywhere (netCDF-4 writes one per dimension). False when h5py is missing or cannot open it."""
    if not is_hdf5(path):
        return False
    try:
        import h5py
    except ImportError:
        return False

    def scale(_: str, obj: object) -> bool | None:
        return True if isinstance(obj, h5py.Dataset) and h5py.h5ds.is_scale(obj.id) else None

    try:
        with h5py.File(path, "r") as f:
            return "_NCProperties" not in f.attrs and not f.visititems(scale)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return False


PLAIN_HDF5 = "HDF5 file that is not netCDF-4 (no _NCProperties, no dimension scales)"


def plain_hdf5_error(path: str, cause: str, url: str | None = None) -> NczarrError | None:
    """The one-line error when netCDF-4 could not open an HDF5 file that is not netCDF-4, else None."""
    if not plain_hdf5(path):
        return None
    return FormatError(f"{url or path}: {PLAIN_HDF5}: netCDF-4 cannot open it ({cause}); look at it with "
                       "h5dump -H, and write what you need into a netCDF-4 file (netCDF4-python, xarray, or h5py "
                       "with dimension scales), then nc2nczarr")


def netcdf_file_error(spec: StoreSpec, url: str, hint: str = "convert it with nc2nczarr") -> NczarrError | None:
    """The error for a file where a store is expected (a netCDF file, an HDF5 file that is not netCDF-4,
    GRIB, HDF4, text), else None (reads the first bytes; opens an HDF5 file with h5py, never a store).
    ``hint``: what to do with a netCDF file."""
    if spec.kind not in ("file", "zip") or not (os.path.isfile(spec.path) or special_file(spec.path)):
        return None
    foreign = foreign_file_error(spec.path, url)
    if foreign is not None:
        return foreign
    if plain_hdf5(spec.path):
        return UsageError(f"{url}: {PLAIN_HDF5}, not a store: nc2nczarr converts what netCDF-4 can read of it")
    if is_netcdf_file(spec.path) or is_hdf5(spec.path):
        return UsageError(f"{url}: is a netCDF file, not a store: {hint}")
    return None


def output_error(url: str) -> NczarrError | None:
    """The error for a new store's path that names a netCDF file (``out.nc``, ``.nc4``, ``.h5``, ``.hdf5``),
    else None: nc2nczarr writes a store (a directory, or a zip), and the name would tell every reader
    otherwise. A netcdf-c URL whose mode names the store (``file://…/out.nc#mode=nczarr,file``) is kept."""
    spec = parse(url)
    if spec.kind != "file" or spec.modes or not spec.path.lower().endswith(FILE_ENDINGS):
        return None
    stem = os.path.splitext(spec.path.rstrip("/"))[0]
    return UsageError(f"{url}: an output ending {os.path.splitext(spec.path)[1]} names a netCDF file, and nc2nczarr "
                      f"writes an NCZarr store: name it {stem}.zarr (a directory) or {stem}.zip, or keep the name "
                      f"with file://{os.path.abspath(spec.path)}#mode=nczarr,file")
def explain_open_failure(store: Store, url: str, exc: FormatError) -> NczarrError:
    """The error to show when no dataset could be read from ``store``: ``exc`` with the URL, or, where
    there was no dataset at all, what the store knows of why (:meth:`Store.why_no_dataset`: an HTTP status).

    (A Zarr v3 store is no longer refused here: ``zarr3.reader.open_reader`` reads it.)"""
    if isinstance(exc, NoDatasetError):
        why = store.why_no_dataset()
        if why is not None:
            return NoDatasetError(f"{url}: no dataset here: {why}")
    return type(exc)(f"{url}: {exc}")
