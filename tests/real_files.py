"""The real netCDF files the round-trip tests convert (issue 14, Done when).

``corpus/real/*/*.nc`` (sources and licences in corpus/real/README.md) and the netCDF test data the
installed packages ship (xarray's ``tests/data``, scipy's ``io/tests/data``), found where the package
is installed, so a machine without one of them simply tests fewer files.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: (package, folder inside it) holding netCDF test files
INSTALLED_DATA = (("xarray", "tests/data"), ("scipy", "io/tests/data"))  # netCDF4's wheel ships none
#: variables whose source values are undefined, by file name: read them and you get whatever memory held
UNDEFINED = {
    # HDF5 contiguous, never written, fill time NEVER (NOFILL): netcdf-c returns uninitialised memory, a
    # different value on each read; the output keeps it NOFILL (fill_value null) and unwritten
    "f03tst_open_mem.nc": ("/var2",),
}


def installed_files() -> dict[str, Path]:
    """``package/name`` → path of each netCDF test file the installed packages ship."""
    found: dict[str, Path] = {}
    for package, folder in INSTALLED_DATA:
        spec = importlib.util.find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            for path in sorted((Path(root) / folder).glob("*.nc")):
                found[f"{package}/{path.name}"] = path
    return found


_CORPUS = {f"{p.parent.name}/{p.name}": p for p in sorted((REPO / "corpus" / "real").glob("*/*.nc"))}
_ALL = {**_CORPUS, **installed_files()}
REAL = list(_ALL.values())
REAL_IDS = list(_ALL)


def is_netcdf3(path: Path) -> bool:
    """A classic or 64-bit-offset file: it has no chunking, filters or byte order to compare."""
    with path.open("rb") as fh:
        return fh.read(3) == b"CDF"
