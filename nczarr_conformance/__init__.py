"""Reference NCZarr reader/writer and conformance suite.

The public names are imported on first use (module ``__getattr__``, PEP 562): the CLIs
import this package, and ``nc2nczarr --help`` must not pay for numpy, netCDF4 or h5py.

``convert`` and ``check`` are also the names of submodules; Python binds a submodule onto
its package when it is first imported, which would replace the function. The package's
module class refuses that one binding, so ``nczarr_conformance.convert`` is always the
function (the module stays importable: ``from nczarr_conformance.convert import ...``).
"""
from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nczarr_conformance.api import check, convert, write, write_dataset
    from nczarr_conformance.dataset import open_dataset
    from nczarr_conformance.lazy import LazyDataset, open
    from nczarr_conformance.model import Dataset

__all__ = ["open", "write", "convert", "check", "LazyDataset", "open_dataset", "write_dataset", "Dataset",
           "__version__"]
__version__ = "0.1.0"

_LAZY = {"open": ".lazy", "LazyDataset": ".lazy", "write": ".api", "convert": ".api", "check": ".api",
         "open_dataset": ".dataset", "Dataset": ".model", "write_dataset": ".api"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """This package's module: a submodule import never rebinds a public function's name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
