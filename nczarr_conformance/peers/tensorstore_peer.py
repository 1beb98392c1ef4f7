"""TensorStore's zarr and zarr3 drivers (arrays only); named ``tensorstore_peer`` so that no module here
is called as a library it imports."""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance.model import Dataset, Group, Variable
from nczarr_conformance.peers.base import CannotExpress, reject_options
from nczarr_conformance.peers.capabilities import PURE_ZARR, PURE_ZARR_V3
from nczarr_conformance.peers.common import ZARR_JSON, PythonPackagePeer, plain, v3_node_type, variable_from_values
from nczarr_conformance.stores import DirectoryStore


class TensorStore(PythonPackagePeer):
    """TensorStore's ``zarr`` driver on Zarr v2 arrays and its ``zarr3`` driver on v3 ones."""

    id, name, reads = "tensorstore", "TensorStore zarr and zarr3 drivers", True
    #: its pinned faults (conformance/known.py): the zarr driver refuses a filters list
    known: tuple[Mapping[str, Any], ...] = (
        {"writer": ["ours", "ours-nczarr-2"], "cases": ["shuffle-zlib"],
         "why": "TensorStore's zarr driver refuses a filters list; it refuses netcdf-c 4.10's output identically",
         "evidence": {"kind": "same_as_writer", "writer": "netcdf-c-4.10"}},
        {"writer": "ours-zarr", "cases": ["shuffle-zlib"],
         "why": "TensorStore's zarr driver refuses a filters list; it refuses zarr-python's output identically",
         "evidence": {"kind": "same_as_writer", "writer": "zarr-python"}},
    )
    capabilities = PURE_ZARR - {"attributes"}  # arrays only: attributes are not compared
    package = "tensorstore"

    def read(self, url: str) -> Dataset:
        import tensorstore as ts

        store = DirectoryStore(url)
        root = Group()
        for key in store.list_prefix("/"):
            if key.endswith("/.zarray"):
                path, driver = key[1: -len("/.zarray")], "zarr"
            elif key.endswith(f"/{ZARR_JSON}") and v3_node_type(Path(url) / key[1:].rsplit("/", 1)[0]) == "array":
                path, driver = key[1: -len(f"/{ZARR_JSON}")], "zarr3"
            else:
                continue
            array = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(Path(url).resolve())},
                             "path": path}, read=True).result()
            values = array.read().result()
            group = root
            *parents, name = path.split("/")
            for part in parents:
                group = group.groups.setdefault(part, Group())
            group.variables[name] = variable_from_values(np.asarray(values), {})
        return Dataset(root)


def _v3_fill_json(value: Any) -> Any:
    """A fill value in the v3 ``fill_value`` JSON forms: NaN and the infinities as their names."""
    number = np.asarray(value).ravel()[0].item()
    if isinstance(number, float) and not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    return number


class TensorStoreV3(TensorStore):
    """TensorStore's ``zarr3`` driver as a writer: every variable an array it creates and fills, with
    ``dimension_names``, plain JSON ``attributes``, the variable's fill, chunks, byte order (``bytes``),
    F order (``transpose``), key separator and filters (shuffle + zlib → ``blosc`` with zlib and byte
    shuffle, zlib alone → ``gzip``: TensorStore has no numcodecs codecs). TensorStore has no groups, so each
    group's ``zarr.json`` is written as JSON, as zarr-python writes it; it has no text data types, so a
    case with string or char data cannot be written (said, not failed)."""

    id, name, reads, writes = "tensorstore-v3", "TensorStore zarr3 driver (writer)", False, True
    known = ()  # a writer only
    capabilities = PURE_ZARR_V3

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        unknown = set(options) - {"order", "separator"}
        if unknown:
            reject_options({k: options[k] for k in unknown}, self.id)
        self._write_group(target, "", dataset.root, options)
        return str(target)

    def _write_group(self, root: Path, path: str, group: Group, options: dict[str, str]) -> None:
        node = root / path if path else root
        node.mkdir(parents=True, exist_ok=True)
        doc = {"zarr_format": 3, "node_type": "group",
               "attributes": {n: plain(a) for n, a in group.attributes.items()}}
        (node / ZARR_JSON).write_text(json.dumps(doc))
        for name, var in group.variables.items():
            self._write_array(root, f"{path}/{name}".lstrip("/"), var, options)
        for name, sub in group.groups.items():
            self._write_group(root, f"{path}/{name}".lstrip("/"), sub, options)

    def _write_array(self, root: Path, path: str, var: Variable, options: dict[str, str]) -> None:
        import tensorstore as ts

        if var.type in ("string", "char"):
            raise CannotExpress(f"TensorStore's zarr3 driver has no data type for netCDF {var.type}")
        data = np.asarray(var.data)
        itemsize = data.dtype.itemsize
        codecs: list[dict[str, Any]] = []
        if options.get("order") == "F":
            codecs.append({"name": "transpose", "configuration": {"order": list(reversed(range(data.ndim)))}})
        serializer: dict[str, Any] = {"name": "bytes"}
        if itemsize > 1:
            serializer["configuration"] = {"endian": "big" if var.endianness == "big" else "little"}
        codecs.append(serializer)
        ids = [cfg["id"] for cfg in var.filters or []]
        level = next((cfg.get("level", 1) for cfg in var.filters or [] if cfg["id"] == "zlib"), 1)
        if "shuffle" in ids and "zlib" in ids:
            codecs.append({"name": "blosc", "configuration": {"cname": "zlib", "clevel": level, "shuffle": "shuffle",
                                                              "typesize": itemsize, "blocksize": 0}})
        elif "zlib" in ids:
            codecs.append({"name": "gzip", "configuration": {"level": level}})
        fill = var.fill_value
        metadata: dict[str, Any] = {
            "shape": list(data.shape), "data_type": data.dtype.name, "codecs": codecs,
            "chunk_grid": {"name": "regular", "configuration": {
                "chunk_shape": [int(c) for c in var.chunks] if var.chunks else [max(n, 1) for n in data.shape]}},
            "fill_value": _v3_fill_json(fill) if fill is not None else 0,
            "dimension_names": [d.rsplit("/", 1)[-1] for d in var.dimensions],
            "attributes": {n: plain(a) for n, a in var.attributes.items() if n != "_FillValue"},
        }
        if options.get("separator"):
            metadata["chunk_key_encoding"] = {"name": "default", "configuration": {"separator": options["separator"]}}
        array = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root.resolve())}, "path": path,
                         "metadata": metadata, "create": True}).result()
        array.write(data).result()
