"""Reference NCZarr reader/writer and conformance suite."""
from __future__ import annotations

from .dataset import open_dataset
from .model import Dataset
from .nczarr.writer import write_dataset

__all__ = ["open_dataset", "write_dataset", "Dataset", "__version__"]
__version__ = "0.1.0"
