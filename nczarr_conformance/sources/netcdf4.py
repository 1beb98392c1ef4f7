"""netCDF-4/HDF5 input through netCDF4-python (netcdf-c underneath): a file (or netcdf-c URL) as the canonical model.

The converter, ``--append``/``--concat`` and ``nczarr-dump IN.nc`` read their input here; the netCDF4-python
implementation the conformance matrix grades reads stores through this adapter too.

netCDF4-python hands back a single-element NC_STRING attribute and an NC_CHAR
attribute both as ``str``; the exact type is asked of the very libnetcdf the
module loaded (``nc_inq_atttype`` through ctypes), so the model stays exact.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
import warnings
from collections.abc import Container, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import numpy as np

from nczarr_conformance.errors import (
    FormatError,
    NczarrError,
    StoreError,
    UnsupportedError,
)
from nczarr_conformance.model import (
    STORAGE_INTERNAL_PREFIXES,
    Attribute,
    Dataset,
    Dimension,
    Group,
    Variable,
    attribute_from_python,
    is_internal_attribute,
)
from nczarr_conformance.nczarr.dtypes import numpy_dtype
from nczarr_conformance.sources import hdf5_types
from nczarr_conformance.sources.hdf5_types import Finding
from nczarr_conformance.stores import sniff

ID = "netcdf4-python"
NC_TYPE_NAMES = {1: "byte", 2: "char", 3: "short", 4: "int", 5: "float", 6: "double", 7: "ubyte",
                 8: "ushort", 9: "uint", 10: "int64", 11: "uint64", 12: "string"}
NC_GLOBAL = -1
NC_MAX_ATOMIC_TYPE = 12
#: netCDF-4 user-defined type classes (netcdf.h NC_VLEN … NC_COMPOUND): outside the NCZarr model
USER_CLASSES = {13: "vlen", 14: "opaque", 15: "enum", 16: "compound"}
#: netCDF4-python and HDF5 are not thread-safe; every call into them holds this, and so does every open and
#: close (:func:`open_nc`, :func:`close_nc`): a netCDF4.Dataset's life begins and ends under it.
LOCK = threading.RLock()
#: the one netCDF4.Dataset open for reading per file in this process (file identity or URL → [dataset, users]),
#: shared by all its users and closed by the last (:func:`close_nc`). netcdf-c 4.10.1 crashes (SIGSEGV, in
#: one thread, no lock can help) when one file is open three times, a string variable read through one and
#: the others closed before it is opened again: as two conversions of one file on two threads do.
_SHARED: dict[object, list[Any]] = {}
#: id(dataset) → its key in _SHARED
_SHARED_KEYS: dict[int, object] = {}
#: netCDF4-python's names of the HDF5 blosc filter's compressors (its codes 0-5) → numcodecs' Blosc cnames
BLOSC_NAMES = {"blosc_lz": "blosclz", "blosc_lz4": "lz4", "blosc_lz4hc": "lz4hc", "blosc_snappy": "snappy",
               "blosc_zlib": "zlib", "blosc_zstd": "zstd"}


def available() -> bool:
    try:
        import netCDF4  # noqa: F401
    except ImportError:
        return False
    return True


def version() -> str:
    import netCDF4

    return f"netCDF4-python {netCDF4.__version__} (netcdf-c {netCDF4.__netcdf4libversion__})"


@lru_cache(maxsize=1)
def _libnetcdf() -> Any | None:
    import netCDF4

    here = os.path.dirname(netCDF4.__file__)
    candidates = sorted(glob.glob(os.path.join(here, "..", "netcdf4.libs", "libnetcdf*.so*")))
    candidates += sorted(glob.glob(os.path.join(here, "..", "netCDF4.libs", "libnetcdf*.so*")))
    for path in candidates:
        if (lib := _loaded(path)) is not None:
            return lib
    # the system's, asked last: find_library runs ``ldconfig -p`` (a child process, ~20 ms a conversion)
    found = ctypes.util.find_library("netcdf")
    return _loaded(found) if found else None


def _loaded(path: str) -> Any | None:
    """libnetcdf at ``path`` with nc_inq_atttype's signature, or None when it does not load."""
    try:
        lib = ctypes.CDLL(path)
        lib.nc_inq_atttype.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
        return lib
    except OSError:
        return None


def _attr_xtype(ncid: int, varid: int, name: str) -> int | None:
    lib = _libnetcdf()
    if lib is None:
        return None
    xtype = ctypes.c_int()
    if lib.nc_inq_atttype(ncid, varid, name.encode("utf-8"), ctypes.byref(xtype)) != 0:
        return None
    return xtype.value


def _attr_type(ncid: int, varid: int, name: str) -> str | None:
    xtype = _attr_xtype(ncid, varid, name)
    return None if xtype is None else NC_TYPE_NAMES.get(xtype)


def _user_type(ncid: int, xtype: int) -> str:
    """``compound cmp_t``: the class and name of a user-defined type (nc_inq_user_type)."""
    lib = _libnetcdf()
    name = ctypes.create_string_buffer(257)
    size, base, nfields, klass = ctypes.c_size_t(), ctypes.c_int(), ctypes.c_size_t(), ctypes.c_int()
    if lib is None or lib.nc_inq_user_type(ncid, xtype, name, ctypes.byref(size), ctypes.byref(base),
                                           ctypes.byref(nfields), ctypes.byref(klass)) != 0:
        return f"user-defined type {xtype}"
    return f"{USER_CLASSES.get(klass.value, 'user-defined')} {name.value.decode('utf-8', 'replace')}"


def outside_model(ncgroup: Any) -> list[tuple[str, str]]:
    """(``/g/var`` or ``/g/var:attr``, ``compound cmp_t``) for every variable and attribute of a
    user-defined type, in ``ncgroup`` and below.

    Asked of libnetcdf, because netCDF4-python hides some (an opaque variable is not in
    ``variables``) and disguises others (an enum variable looks like its base integer type).
    """
    lib = _libnetcdf()
    if lib is None:
        return []
    found: list[tuple[str, str]] = []

    def attributes(ncid: int, varid: int, prefix: str) -> None:
        natts = ctypes.c_int()
        if lib.nc_inq_varnatts(ncid, varid, ctypes.byref(natts)) != 0:
            return
        for i in range(natts.value):
            aname = ctypes.create_string_buffer(257)
            if lib.nc_inq_attname(ncid, varid, i, aname) != 0:
                continue
            text = aname.value.decode("utf-8", "replace")
            xtype = _attr_xtype(ncid, varid, text)
            if xtype is not None and xtype > NC_MAX_ATOMIC_TYPE:
                found.append((f"{prefix}:{text}", _user_type(ncid, xtype)))

    def walk(group: Any) -> None:
        ncid = group._grpid
        path = group.path.rstrip("/")
        attributes(ncid, NC_GLOBAL, path or "/")
        nvars = ctypes.c_int()
        if lib.nc_inq_nvars(ncid, ctypes.byref(nvars)) == 0:
            for varid in range(nvars.value):
                vname = ctypes.create_string_buffer(257)
                xtype = ctypes.c_int()
                if lib.nc_inq_varname(ncid, varid, vname) != 0 or lib.nc_inq_vartype(ncid, varid, ctypes.byref(xtype)):
                    continue
                vpath = f"{path}/{vname.value.decode('utf-8', 'replace')}"
                if xtype.value > NC_MAX_ATOMIC_TYPE:
                    found.append((vpath, _user_type(ncid, xtype.value)))
                attributes(ncid, varid, vpath)
        for sub in group.groups.values():
            walk(sub)

    with LOCK:
        walk(ncgroup)
    return found


def _read_attributes(obj: Any, ncid: int, varid: int, *, skip_outside: bool = False,
                     leave_out: Container[str] = (), shown_reserved: bool = False) -> dict[str, Attribute]:
    """The model's attributes; one of a user-defined type is refused (``skip_outside``: left out).

    ``leave_out``: names of attributes not to read at all (the converter's ``--skip-unsupported``
    leaves out what hdf5_types found, e.g. a zero-length attribute the model cannot hold).
    ``shown_reserved``: keep a reserved NCZarr name (``_nczarr*``, ``_NCZARR*``) that netcdf-c shows as a
    user attribute, as the matrix's reader does, so a leak is a difference (issue 34).
    """
    out: dict[str, Attribute] = {}
    for name in obj.ncattrs():
        reserved_shown = shown_reserved and name.startswith(STORAGE_INTERNAL_PREFIXES)
        if (is_internal_attribute(name) and not reserved_shown) or name in leave_out:
            continue  # netcdf-c shows _nczarr_maxstrlen; the converter's model never does
        xtype = _attr_xtype(ncid, varid, name)
        if xtype is not None and xtype > NC_MAX_ATOMIC_TYPE:
            if skip_outside:
                continue
            raise UnsupportedError(f"attribute {name}: type {_user_type(ncid, xtype)} is outside the NCZarr model")
        value = obj.getncattr(name)
        nctype = None if xtype is None else NC_TYPE_NAMES.get(xtype)
        if nctype == "string":
            items = [value] if isinstance(value, str) else list(value)
            out[name] = Attribute("string", np.array(items, dtype=object))
        elif nctype == "char":
            out[name] = Attribute("char", value if isinstance(value, str) else
                                  bytes(np.atleast_1d(value).astype("S1")).decode("utf-8", "replace"))
        elif nctype is not None:
            out[name] = Attribute(nctype, np.atleast_1d(np.asarray(value)).astype(numpy_dtype(nctype)))
        else:
            out[name] = attribute_from_python(value)
    return out


def filters_of(var: Any) -> list[dict[str, Any]]:
    """netCDF4 filter settings as numcodecs configurations (filters first, compressor last)."""
    f = var.filters() or {}
    configs: list[dict[str, Any]] = []
    itemsize = np.dtype(var.dtype).itemsize if var.dtype is not str else 1
    if f.get("shuffle"):
        configs.append({"id": "shuffle", "elementsize": itemsize})
    level = int(f.get("complevel") or 0)
    if f.get("zlib"):
        configs.append({"id": "zlib", "level": level})
    elif f.get("zstd"):
        configs.append({"id": "zstd", "level": level})
    elif f.get("bzip2"):
        configs.append({"id": "bz2", "level": max(1, level)})
    elif isinstance(f.get("blosc"), dict):
        blosc = f["blosc"]
        name = str(blosc.get("compressor", "blosc_lz4"))
        configs.append({"id": "blosc", "cname": BLOSC_NAMES.get(name, name.removeprefix("blosc_")),
                        "clevel": level, "shuffle": int(blosc.get("shuffle", 1))})
    elif f.get("szip"):
        configs.append({"id": "szip"})  # no numcodecs codec: a converter refuses it, a reader just reports it
    if f.get("fletcher32"):
        # Last, as netcdf-c's NCZarr writes it (compressor {"id": "fletcher32"} after shuffle and zlib);
        # numcodecs' Fletcher32 is the HDF5 checksum netcdf-c's plugin computes.
        configs.append({"id": "fletcher32"})
    return configs


def variable_header(var: Any, group_path: str, *, skip_outside: bool = False,
                    leave_out: Container[str] = (), shown_reserved: bool = False) -> Variable:
    """A model Variable (no data) for one netCDF4.Variable of an atomic type.

    ``skip_outside``: leave out its attributes of user-defined types instead of refusing them;
    ``leave_out``: names of attributes not to read; ``shown_reserved``: as :func:`_read_attributes`.
    """
    xtype = int(getattr(var.datatype, "_nc_type", 0))  # CompoundType, VLType, EnumType (NC_STRING is a VLType too)
    if xtype > NC_MAX_ATOMIC_TYPE:
        raise UnsupportedError(f"{group_path.rstrip('/')}/{var.name}: type {_user_type(var.group()._grpid, xtype)}"
                               " is outside the NCZarr model")
    dims = []
    for dim_name in var.dimensions:
        dims.append(_dimension_path(var.group(), dim_name))
    if var.dtype is str:
        nctype = "string"
    else:
        dt = np.dtype(var.dtype)
        nctype = "char" if dt.kind == "S" else _numeric_type(dt)
    chunking = var.chunking()
    endian = var.endian()
    return Variable(
        nctype, dims, tuple(int(n) for n in var.shape),
        _read_attributes(var, var.group()._grpid, var._varid, skip_outside=skip_outside, leave_out=leave_out,
                         shown_reserved=shown_reserved),
        chunks=None if chunking in ("contiguous", None) or not var.shape else [int(c) for c in chunking],
        endianness=None if nctype in ("char", "string", "byte", "ubyte") else ("big" if endian == "big" else "little"),
        filters=filters_of(var),
        no_fill=_no_fill(var),
    )


def _no_fill(var: Any) -> bool:
    """NOFILL mode, asked of libnetcdf (nc_inq_var_fill): netCDF4-python's None fill value also means "string"."""
    lib = _libnetcdf()
    if lib is None:
        return var.dtype is not str and var.get_fill_value() is None
    no_fill = ctypes.c_int()
    if lib.nc_inq_var_fill(var.group()._grpid, var._varid, ctypes.byref(no_fill), None) != 0:
        return False
    return bool(no_fill.value)


def _numeric_type(dt: np.dtype) -> str:
    from nczarr_conformance.nczarr.dtypes import nctype_of_numpy

    return nctype_of_numpy(dt)


def _dimension_path(group: Any, name: str) -> str:
    """Fully qualified name of the dimension ``name`` as seen from ``group`` (nearest ancestor)."""
    g = group
    while g is not None:
        if name in g.dimensions:
            path = g.path.rstrip("/")
            return f"{path}/{name}"
        g = g.parent
    raise FormatError(f"dimension {name} not found from group {group.path}")


def _file_of(var: Any) -> str:
    try:
        return str(var.group().filepath())
    except (ValueError, RuntimeError, AttributeError):  # a libnetcdf without nc_inq_path
        return "the file"


def _variable_path(var: Any) -> str:
    return f"{var.group().path.rstrip('/')}/{var.name}"


def read_values(var: Any, region: tuple[slice, ...] | None = None) -> np.ndarray:
    """Raw stored values (no masking, scaling or char-to-string)."""
    with LOCK:
        var.set_auto_maskandscale(False)
        var.set_auto_chartostring(False)
        if hasattr(var, "set_always_mask"):
            var.set_always_mask(False)
        try:
            data = var[region] if region else var[...]
        except RuntimeError as exc:  # libnetcdf's error code: the file, not our code (issue 39)
            raise FormatError(f"{_file_of(var)}: {_variable_path(var)}: cannot read its values: {exc} (a chunk "
                              "that does not decode: the file is damaged, fails a checksum, or changed while "
                              "it was read)") from None
    arr = np.ma.getdata(data)
    if var.dtype is str:
        out = np.empty(np.shape(arr), dtype=object)
        out[...] = arr
        return out
    return np.asarray(arr)


def _read_group(ncgroup: Any, path: str, data: bool, shown_reserved: bool = False) -> Group:
    group = Group()
    for name, dim in ncgroup.dimensions.items():
        group.dimensions[name] = Dimension(len(dim), dim.isunlimited())
    group.attributes = _read_attributes(ncgroup, ncgroup._grpid, NC_GLOBAL, shown_reserved=shown_reserved)
    for name, var in ncgroup.variables.items():
        model_var = variable_header(var, path, shown_reserved=shown_reserved)
        if data:
            model_var.data = read_values(var)
        group.variables[name] = model_var
    for name, sub in ncgroup.groups.items():
        group.groups[name] = _read_group(sub, path.rstrip("/") + "/" + name, data, shown_reserved)
    return group


def filter_available(nc: Any, filter_id: int) -> bool:
    """Whether the HDF5 library under this netCDF4 module can apply HDF5 filter ``filter_id``
    (built in, or a plugin on HDF5_PLUGIN_PATH, which netCDF4-python points at its own)."""
    lib = _libnetcdf()
    if lib is None:
        return True  # cannot ask: the read will say
    with LOCK:
        return bool(lib.nc_inq_filter_avail(nc._grpid, ctypes.c_uint(filter_id)) == 0)


def refusal(path: str, findings: list[Finding], hint: str = "") -> str:
    """One line naming every object of ``findings``: ``PATH: types outside the NCZarr model: /c (compound
    cmp_t)``, or ``PATH: netCDF-4 cannot read, or the NCZarr model cannot hold: /h (float16: …)``."""
    lead = ("types outside the NCZarr model" if all(f.why == hdf5_types.OUTSIDE for f in findings)
            else "netCDF-4 cannot read, or the NCZarr model cannot hold")
    return f"{path}: {lead}: {', '.join(f.listed for f in findings)}{hint}"


def open_nc(path: str, *, check: str = "reading") -> Any:
    """Open for reading, mapping netCDF4's errors to ours.

    An HDF5 file is looked at with h5py first (sources/hdf5_types.py), because netCDF4-python hides
    some objects, misreads others and crashes on a few: ``check="reading"`` refuses, in one line
    naming each, those that would crash or fail a read into the model (nothing is hidden from a
    reader of what netCDF-4 shows); ``"all"`` refuses every object netCDF-4 or the model cannot
    hold (a writer that must not lose anything silently); ``"none"``: the caller has looked.
    """
    import netCDF4

    foreign = sniff.foreign_file_error(path)  # GRIB, HDF4, CDL, text: say what it is, not "Unknown file format"
    if foreign is not None:
        raise foreign
    found = None
    if check != "none":
        with LOCK:
            found = hdf5_types.scan(path)
        bad = [f for f in found.findings if check == "all" or f.breaks_reading]
        if any(f.fatal for f in bad):  # netCDF4 must not open it at all
            raise UnsupportedError(refusal(path, bad))
    try:
        with LOCK, warnings.catch_warnings():
            # netCDF4-python warns (stderr) on a type it cannot represent; outside_model and hdf5_types name it instead
            warnings.filterwarnings("ignore", message="WARNING: unsupported", category=UserWarning)
            warnings.filterwarnings("ignore", message="WARNING: variable .* has unsupported datatype",
                                    category=UserWarning)
            key = _share_key(path)
            shared = _SHARED.get(key)
            if shared is not None and not shared[0].isopen():  # closed by nc.close(), not close_nc: forgotten
                del _SHARED[key], _SHARED_KEYS[id(shared[0])]
                shared = None
            if shared is not None:
                shared[1] += 1
                nc = shared[0]
            else:
                nc = netCDF4.Dataset(path, "r")
                _SHARED[key], _SHARED_KEYS[id(nc)] = [nc, 1], key
    except FileNotFoundError as exc:
        raise StoreError(f"{path}: no such file or directory") from exc
    except OSError as exc:
        raise _plain_hdf5_or(path, str(exc.strerror or exc),
                             f"{path}: not a netCDF file netCDF4-python can open ({exc.strerror or exc})") from exc
    except TypeError as exc:  # a user type numpy cannot express, e.g. an array of a nested compound
        raise FormatError(f"{path}: netCDF4-python cannot open this file ({exc}); it is outside the NCZarr "
                          "model") from exc
    except (RuntimeError, AttributeError, KeyError, ValueError) as exc:  # e.g. a malformed _Netcdf4Coordinates
        cause = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        raise _plain_hdf5_or(path, cause, f"{path}: netCDF4-python cannot open this file ({cause})") from exc
    if found is not None:
        bad = [f for f in found.findings if check == "all" or f.breaks_reading]
        bad += hdf5_types.unavailable_filters(found, lambda fid: filter_available(nc, fid))
        if bad:
            close_nc(nc)
            raise UnsupportedError(refusal(path, bad))
    return nc


def _share_key(path: str) -> object:
    """What identifies the file ``path`` opens: its device and inode (one file by any name), else the URL."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return ("url", path)
    return ("file", st.st_dev, st.st_ino)


def close_nc(nc: Any) -> None:
    """Give back a dataset :func:`open_nc` handed out: the last of its users closes it, under :data:`LOCK`.

    Every dataset this package opens ends here (or in :func:`opened`): not in ``nc.close()`` outside the lock, nor
    in netCDF4's ``__dealloc__`` (which closes a dataset still open when its last reference goes, wherever that
    happens): netcdf-c crashed in a close that ran while another thread read values."""
    with LOCK:
        key = _SHARED_KEYS.get(id(nc))
        shared = _SHARED.get(key) if key is not None else None
        if shared is None or shared[0] is not nc:  # not shared (opened for writing), or forgotten once closed
            if nc.isopen():
                nc.close()
            return
        shared[1] -= 1
        if shared[1] == 0:
            del _SHARED[key], _SHARED_KEYS[id(nc)]
            if nc.isopen():  # not if a user closed it with nc.close()
                nc.close()


@contextmanager
def opened(path: str, *, check: str = "reading") -> Iterator[Any]:
    """:func:`open_nc` for the block, :func:`close_nc` after it, whatever happens inside.

    The block does not hold :data:`LOCK` (a generator yielding inside it would hold it for its consumer): each
    call into netCDF4 inside takes it (:func:`read_values`, or ``with LOCK:``); the open and the close take it."""
    nc = open_nc(path, check=check)
    try:
        yield nc
    finally:
        close_nc(nc)


def _plain_hdf5_or(path: str, cause: str, otherwise: str) -> NczarrError:
    """The error naming an HDF5 file that is not netCDF-4 as such (stores/sniff.py), else ``otherwise``."""
    with LOCK:
        plain = sniff.plain_hdf5_error(path, cause)
    return plain if plain is not None else FormatError(otherwise)


def read(path: str, *, data: bool = True, shown_reserved: bool = False) -> Dataset:
    """The canonical model of a netCDF file or netcdf-c URL, as netcdf-c sees it.

    ``shown_reserved``: keep the reserved ``_nczarr*``/``_NCZARR*`` names netcdf-c shows as user attributes
    (the matrix's netcdf-c reader: a store that leaks one then differs from its intended model)."""
    with opened(path) as nc, LOCK:
        return Dataset(_read_group(nc, "/", data, shown_reserved))
