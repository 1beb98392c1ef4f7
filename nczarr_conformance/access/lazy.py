"""A dataset opened by URL whose data stay in the store until a selection asks for them.

``nczarr_conformance.open(url)`` returns a :class:`LazyDataset`: the metadata are read
once (no chunk), ``ds["g/v"][0:2, ::3]`` reads only the chunks that selection touches
(nczarr/selection.py), and closing it (``with``) releases the store. Attributes are shown
as netCDF4-python shows them (a char attribute is a ``str``, one number a numpy scalar,
several an array, one string a ``str``, several a list), so code written against
netCDF4-python reads an NCZarr store the same way; the xarray engine uses the same view.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Self

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.errors import FormatError
from nczarr_conformance.model import Attribute, Dimension, Group, Variable
from nczarr_conformance.nczarr.reader import ArrayInfo, DatasetReader
from nczarr_conformance.nczarr.selection import read_selection
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.base import Pin, Store
from nczarr_conformance.stores.sniff import explain_open_failure, netcdf_file_error
from nczarr_conformance.urls import parse
from nczarr_conformance.zarr3.reader import open_reader

__all__ = ["LazyDataset", "LazyGroup", "LazyVariable", "netcdf4_value", "open"]


def netcdf4_value(attr: Attribute) -> Any:
    """An attribute's value as netCDF4-python's ``getncattr`` returns it for the same netCDF attribute."""
    if attr.type == "char":
        return attr.value
    if attr.type == "string":
        items = [str(v) for v in attr.value.tolist()]
        return items[0] if len(items) == 1 else items
    values = np.asarray(attr.value)
    values = values.astype(values.dtype.newbyteorder("="))
    return values[0] if values.size == 1 else values


def _attrs(attributes: Mapping[str, Attribute]) -> dict[str, Any]:
    return {name: netcdf4_value(attr) for name, attr in attributes.items()}


class LazyVariable:
    """One variable: metadata in memory, values read on indexing (``v[...]``, ``np.asarray(v)``)."""

    def __init__(self, dataset: LazyDataset, path: str, variable: Variable) -> None:
        self._dataset = dataset
        self.path = path
        self.model = variable

    @property
    def name(self) -> str:
        return keys.basename(self.path)

    @property
    def dimensions(self) -> tuple[str, ...]:
        """Dimension names, as netCDF4-python gives them (without the group path)."""
        return tuple(keys.basename(d) for d in self.model.dimensions)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.model.shape)

    @property
    def ndim(self) -> int:
        return len(self.model.shape)

    @property
    def nctype(self) -> str:
        """The netCDF type name (``"int"``, ``"char"``, ``"string"``, ...)."""
        return self.model.type

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of what indexing returns: the stored dtype, ``S1`` for char, ``object`` for string."""
        if self.model.type == "char":
            return np.dtype("S1")
        if self.model.type == "string":
            return np.dtype(object)
        return self.info.storage.numpy

    @property
    def chunks(self) -> tuple[int, ...] | None:
        return None if self.model.chunks is None else tuple(self.model.chunks)

    @property
    def attrs(self) -> dict[str, Any]:
        return _attrs(self.model.attributes)

    @property
    def info(self) -> ArrayInfo:
        return self._dataset.reader.arrays[self.path]

    def __getitem__(self, key: Any) -> np.ndarray:
        return read_selection(self._dataset.live_reader(), self.path, key)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        values = self[...]
        return values if dtype is None else values.astype(dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a scalar variable")
        return self.shape[0]

    def __repr__(self) -> str:
        dims = ", ".join(f"{d}={s}" for d, s in zip(self.dimensions, self.shape, strict=False))
        return f"<LazyVariable {self.path} {self.nctype}({dims})>"


class LazyGroup:
    """A group: its dimensions, attributes, variables and sub-groups; ``g["a/b"]`` walks paths."""

    def __init__(self, dataset: LazyDataset, path: str, group: Group) -> None:
        self._dataset = dataset
        self.path = path
        self.model = group

    @property
    def name(self) -> str:
        return keys.basename(self.path) if self.path != "/" else "/"

    @property
    def dimensions(self) -> dict[str, Dimension]:
        """The dimensions defined in this group (name → size and unlimited)."""
        return dict(self.model.dimensions)

    @property
    def attrs(self) -> dict[str, Any]:
        return _attrs(self.model.attributes)

    @property
    def variables(self) -> dict[str, LazyVariable]:
        return {name: LazyVariable(self._dataset, keys.join(self.path, name), var)
                for name, var in self.model.variables.items()}

    @property
    def groups(self) -> dict[str, LazyGroup]:
        return {name: LazyGroup(self._dataset, keys.join(self.path, name), sub)
                for name, sub in self.model.groups.items()}

    def walk(self) -> Iterator[LazyGroup]:
        """This group and every descendant, parents first."""
        yield self
        for sub in self.groups.values():
            yield from sub.walk()

    def __getitem__(self, path: str) -> Any:
        """The variable or group at ``path``, relative to this group (``/...``: from the root)."""
        parts = [p for p in path.split("/") if p]
        node: LazyGroup = self._dataset if path.startswith("/") else self
        if not parts:
            return node
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            if last and part in node.model.variables:  # that one alone: a dict of all costs O(n) per lookup
                return LazyVariable(node._dataset, keys.join(node.path, part), node.model.variables[part])
            if part not in node.model.groups:
                raise KeyError(f"{keys.join(node.path, part)}: no such variable or group")
            node = LazyGroup(node._dataset, keys.join(node.path, part), node.model.groups[part])
        return node

    def __contains__(self, path: object) -> bool:
        try:
            self[str(path)]
        except KeyError:
            return False
        return True

    def _title(self) -> str:
        return f"<LazyGroup {self.path}>"

    def __repr__(self) -> str:
        """The title line, then dimensions, variables, attributes and sub-groups (access/show.py)."""
        from nczarr_conformance.access.show import text_lines

        return "\n".join([self._title(), *text_lines(self)])

    def _repr_html_(self) -> str:
        """What a notebook shows: the same contents as ``repr``, groups folded (access/show.py)."""
        import html

        from nczarr_conformance.access.show import html_section

        return f"<div><strong>{html.escape(self._title())}</strong>{html_section(self)}</div>"


class LazyDataset(LazyGroup):
    """The root group of an open store; a context manager (``close()`` releases the store)."""

    def __init__(self, url: str | os.PathLike[str], *, max_bytes: int | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        text = os.fspath(url)
        spec = parse(text, storage_options)
        refused = netcdf_file_error(spec, text, "read it with netCDF4-python, or convert it with "
                                               "nczarr_conformance.convert")
        if refused is not None:
            raise refused
        self.url = text
        self.storage_options = dict(storage_options or {})
        self.store: Store = open_store(spec)
        try:
            self.reader = open_reader(self.store, pure_zarr=spec.pure_zarr, xarray=spec.xarray,
                                        max_bytes=max_bytes)
        except FormatError as exc:
            self.store.close()
            raise explain_open_failure(self.store, text, exc) from exc
        except BaseException:
            self.store.close()
            raise
        self.closed = False
        super().__init__(self, "/", self.reader.dataset.root)

    @property
    def flavor(self) -> str:
        """The layout detected (``nczarr-4.10``, ``nczarr-2``, ``nczarr-2-upper``, ``nczarr-v1``, ``zarr``,
        ``zarr-v3``)."""
        return self.reader.flavor

    def live_reader(self) -> DatasetReader:
        if self.closed:
            raise ValueError(f"{self.url}: the dataset is closed")
        return self.reader

    def reopen_args(self) -> tuple[str, Pin | None, dict[str, Any]]:
        """What another process (a dask worker) needs to read this dataset's chunks: the URL, a local
        path made absolute (a worker's working directory is its own), the store's pin, which
        ``stores.reopen`` holds the store it opens there to, and the storage options the store was
        opened with (an unsigned or remote store is opened the same way there). Refused once the
        dataset is closed."""
        self.live_reader()
        return _absolute(self.url), self.store.pin(), dict(self.storage_options)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _title(self) -> str:
        return f"<LazyDataset {self.url} ({self.flavor}{', closed' if self.closed else ''})>"


def _absolute(url: str) -> str:
    """``url`` with a relative local path made absolute (netcdf-c URLs and S3 are absolute already)."""
    if "://" in url:
        return url
    path, hash_, fragment = url.partition("#")
    return os.path.abspath(path) + hash_ + fragment


def open(url: str | os.PathLike[str], *, max_bytes: int | None = None,  # shadows open() on purpose: the package API
         storage_options: Mapping[str, Any] | None = None) -> LazyDataset:
    """Open the store a path or netcdf-c URL names (directory, zip, S3, http(s), gs, az; every flavor) for lazy reading.

    ``max_bytes`` caps what one selection may hold in memory (default: ``NCZARR_MAX_IN_MEMORY``).
    ``storage_options`` go to a remote store's client (``{"anon": True}`` reads unsigned; see
    stores/remote.py and stores/s3.py for the keys each takes).
    """
    return LazyDataset(url, max_bytes=max_bytes, storage_options=storage_options)
