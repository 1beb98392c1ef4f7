"""Reference NCZarr reader/writer and conformance suite.

The public names are imported on first use (module ``__getattr__``, PEP 562): the CLIs
import this package, and ``nc2nczarr --help`` must not pay for numpy, netCDF4 or h5py.
No submodule shares a public name (the checker is ``checker/``, the converter
``conversion/from_netcdf.py``), so importing a wing never rebinds ``open``, ``write``,
``convert`` or ``check``. docs/architecture.md says which wing owns what.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nczarr_conformance.access.api import check, convert, write, write_dataset
    from nczarr_conformance.access.dataset import open_dataset
    from nczarr_conformance.access.lazy import LazyDataset, open
    from nczarr_conformance.model import Dataset

__all__ = ["Dataset", "LazyDataset", "__version__", "check", "convert", "open", "open_dataset", "write",
           "write_dataset"]
__version__ = "0.1.0"

_LAZY = {"open": ".access.lazy", "LazyDataset": ".access.lazy", "write": ".access.api", "convert": ".access.api",
         "check": ".access.api", "open_dataset": ".access.dataset", "Dataset": ".model", "write_dataset": ".access.api"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

