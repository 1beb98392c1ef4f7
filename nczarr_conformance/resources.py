"""Files the commands read at run time, shipped inside the package (not in the checkout).

``nczarr-conformance report`` reads netcdf-c's reference stores and CDL from here, so an
installed wheel runs the matrix from any directory. pip installs packages unzipped, so
these are plain paths.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def netcdf_c_corpus() -> Path:
    """netcdf-c's reference files (nczarr_test/, BSD licence in COPYRIGHT beside them)."""
    return PACKAGE_DIR / "corpus" / "netcdf-c"


def model_schema() -> Path:
    """The JSON Schema of the canonical model (docs/contracts/model.schema.json)."""
    return PACKAGE_DIR / "schema" / "model.schema.json"
