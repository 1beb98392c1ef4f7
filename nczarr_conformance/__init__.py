"""Reference NCZarr reader/writer and conformance suite.

The public names are imported on first use (module ``__getattr__``, PEP 562): the CLIs
import this package, and ``nc2nczarr --help`` must not pay for numpy, netCDF4 or h5py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dataset import open_dataset
    from .model import Dataset
    from .nczarr.writer import write_dataset

__all__ = ["open_dataset", "write_dataset", "Dataset", "__version__"]
__version__ = "0.1.0"

_LAZY = {"open_dataset": ".dataset", "Dataset": ".model", "write_dataset": ".nczarr.writer"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
