"""What several built-in peers share: the pure-Zarr view of a store (attributes untyped as JSON has them,
variables from plain values), how a v3 node is found, and the base of a peer that is a Python package."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance.model import Attribute, Variable, is_internal_attribute
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import nctype_of_numpy
from nczarr_conformance.peers.base import Peer
from nczarr_conformance.stores.references import is_reference_path
from nczarr_conformance.urls import is_icechunk_directory


def tool_missing(name: str) -> str | None:
    return None if shutil.which(name) else f"{name} not installed"


def writes_v3(peer: Peer) -> bool:
    """The peer writes Zarr v3: what its capabilities say (``writes-zarr-v3``), never its id."""
    return "writes-zarr-v3" in peer.capabilities


#: the last segment of a Zarr v3 node's metadata object
ZARR_JSON = "zarr.json"


def v3_node_type(path: Path) -> str | None:
    """``"array"`` or ``"group"``: the ``node_type`` of the Zarr v3 node at ``path`` (a directory), or None
    when there is no readable ``zarr.json`` there. How a reader of a directory store finds v3 nodes."""
    try:
        doc = json.loads((path / ZARR_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = doc.get("node_type") if isinstance(doc, dict) else None
    return kind if kind in ("array", "group") else None


#: numpy dtype of a JSON number list → the netCDF type it names (for the zarr view, which compares values)
_JSON_NUMBER_TYPES = {"int64": "int64", "uint64": "uint64", "float64": "double"}


def untyped_attribute(value: Any) -> Attribute:
    """A pure-Zarr attribute exactly as the peer's API handed it back: text as char, a list of texts as
    string, a number or a list of numbers by numpy's own typing; anything else (objects, nested lists,
    booleans, null) as its JSON text. Deliberately not our Appendix D decoder: a reader graded by the
    matrix must not be typed by the code under test."""
    if isinstance(value, str):
        return Attribute("char", value)
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and items and all(isinstance(v, str) for v in items):
        return Attribute("string", np.array(items, dtype=object))
    if items and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        arr = np.asarray(items)
        if arr.dtype.name in _JSON_NUMBER_TYPES:
            return Attribute(_JSON_NUMBER_TYPES[arr.dtype.name], arr)
    return Attribute("char", json.dumps(value))


def untyped_attributes(raw: dict[str, Any]) -> dict[str, Attribute]:
    out: dict[str, Attribute] = {}
    for name, value in raw.items():
        if is_internal_attribute(name) or name == "_FillValue":
            continue
        out[name] = untyped_attribute(value.tolist() if isinstance(value, np.ndarray) else value)
    return out


def variable_from_values(values: np.ndarray, attrs: dict[str, Attribute]) -> Variable:
    arr = np.asarray(values)
    if arr.dtype.kind == "S" and arr.dtype.itemsize > 1:
        flat = [b.decode("utf-8", "replace") for b in arr.ravel().tolist()]
        obj = np.empty(arr.shape, dtype=object)
        obj.ravel()[:] = flat if obj.ndim else None
        if obj.ndim == 0:
            obj[()] = flat[0]
        arr, nctype = obj, "string"
    elif arr.dtype.kind in ("U", "O", "T"):  # T: numpy 2's StringDType, zarr-python 3's Zarr v3 "string"
        obj = np.empty(arr.shape, dtype=object)
        obj[...] = arr
        arr, nctype = obj, "string"
    else:
        nctype = nctype_of_numpy(arr.dtype)
    return Variable(nctype, [], arr.shape, attrs, arr)


def zarr_store(url: str) -> Any:
    """What a zarr-python user opens ``url`` with: a ``.zip`` file through ``zarr.storage.ZipStore`` (zarr-python
    takes a path as a directory), kerchunk references (``.json``, ``.parq``) through ``zarr.storage.FsspecStore``
    over fsspec's reference filesystem (what xarray's and zarr-python's documentation open them with), an Icechunk
    repository through its session's store (:func:`icechunk_store`), anything else as it is."""
    if is_icechunk_directory(url):
        return icechunk_store(url)
    if url.endswith(".zip") and Path(url).is_file():
        import zarr.storage

        return zarr.storage.ZipStore(url, mode="r")
    if is_reference_path(url) and Path(url).exists():
        import zarr.storage

        return zarr.storage.FsspecStore.from_url("reference://", read_only=True,
                                                 storage_options={"fo": url, "remote_protocol": "file"})
    return url


def icechunk_store(path: str) -> Any:
    """The store of branch ``main`` of the Icechunk repository at ``path``, read-only, as icechunk's documentation
    opens a repository of virtual chunks (``Repository.open`` authorizing its virtual chunk containers, a
    ``readonly_session``, ``session.store``; zarr-python and xarray then read it as any Zarr v3 store). Its local
    containers (``file://``) are authorized: the case's netCDF-4 file is in one."""
    import icechunk

    storage = icechunk.local_filesystem_storage(path)
    config = icechunk.Repository.fetch_config(storage)
    containers = (config.virtual_chunk_containers or {}) if config is not None else {}
    local: dict[str, Any] = {prefix: None for prefix in containers if prefix.startswith("file://")}
    repo = icechunk.Repository.open(storage, authorize_virtual_chunk_access=local or None)
    return repo.readonly_session(branch="main").store


class PythonPackagePeer(Peer):
    """A peer that is a Python package: available when it imports, versioned by its distribution."""

    package = ""

    def available(self) -> str | None:
        import importlib

        try:
            importlib.import_module(self.package)
        except ImportError:
            return f"{self.package} not installed"
        return None

    def version(self) -> str:
        from importlib.metadata import version

        return version(self.package)


def fixed_width_bytes(values: np.ndarray) -> np.ndarray:
    """Strings as UTF-8 in the narrowest |Sn that holds them: how a pure-Zarr writer stores text."""
    encoded = [str(v).encode("utf-8") for v in values.ravel()]
    width = max([len(b) for b in encoded] + [1])
    return np.array(encoded, dtype=f"S{width}").reshape(values.shape)


def plain(attr: Attribute) -> Any:
    """An attribute as a pure-Zarr writer stores it: plain JSON, no type."""
    if attr.type == "char":
        return attr.value
    values = json.loads(json.dumps(attr_codec.encode(attr)[0]))
    return values
