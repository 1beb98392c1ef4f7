"""GDAL's multidimensional Zarr driver (gdalmdiminfo, served by peers/gdal_serve.py); named ``gdal_peer``
so that no module here is called as a library it imports."""
from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance.model import Attribute, Dataset, Group
from nczarr_conformance.peers.base import Peer
from nczarr_conformance.peers.capabilities import PURE_ZARR
from nczarr_conformance.peers.common import tool_missing, untyped_attributes, variable_from_values
from nczarr_conformance.workers import WorkerPool, WorkerProtocolError

GDAL_TYPES = {"Int8": "i1", "Byte": "u1", "Int16": "i2", "UInt16": "u2", "Int32": "i4", "UInt32": "u4", "Int64": "i8",
              "UInt64": "u8", "Float32": "f4", "Float64": "f8"}


def _system_python_env() -> dict[str, str]:
    """Our environment without what points an interpreter at our packages (a venv's PYTHONPATH): the
    system Python that has GDAL's bindings imports its own, as gdalmdiminfo knows nothing of Python."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


class Gdal(Peer):
    id, name, reads, capabilities = "gdal", "GDAL Zarr driver (gdalmdiminfo)", True, PURE_ZARR
    #: its pinned faults (conformance/known.py): GDAL 3.6 has no shuffle filter
    known: tuple[Mapping[str, Any], ...] = (
        {"writer": ["ours", "ours-nczarr-2"], "cases": ["shuffle-zlib"],
         "why": "GDAL 3.6 has no shuffle filter; it drops netcdf-c 4.10's output of this case identically",
         "evidence": {"kind": "same_errors_as_writer", "writer": "netcdf-c-4.10"}},
        {"writer": "ours-zarr", "cases": ["shuffle-zlib"],
         "why": "GDAL 3.6 has no shuffle filter; it drops zarr-python's output of this case identically",
         "evidence": {"kind": "same_errors_as_writer", "writer": "zarr-python"}},
    )

    def available(self) -> str | None:
        return tool_missing("gdalmdiminfo")

    def version(self) -> str:
        out = subprocess.run(["gdalmdiminfo", "--version"], check=False, capture_output=True, text=True).stdout.split()
        return out[1].rstrip(",") if len(out) > 1 else ""

    #: an interpreter with GDAL's Python bindings (Debian's python3-gdal) and the worker that makes it
    #: gdalmdiminfo (peers/gdal_serve.py): libgdal loaded once per worker, not once per store
    bindings = "/usr/bin/python3"
    worker = str(Path(__file__).with_name("gdal_serve.py"))
    timeout = 120.0

    def __init__(self) -> None:
        self._pool: WorkerPool | None = None
        self._checked = False
        self._lock = threading.Lock()

    def _workers(self) -> WorkerPool | None:
        """The bindings' workers, or None where the bindings do not import (then each read runs the tool)."""
        with self._lock:
            if not self._checked:
                self._checked = True
                try:
                    found = subprocess.run([self.bindings, "-c", "import osgeo.gdal"], check=False,
                                           capture_output=True, timeout=60, env=_system_python_env()).returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    found = False
                if found:
                    self._pool = WorkerPool([self.bindings, self.worker], _system_python_env, None)
            return self._pool

    def mdiminfo(self, url: str) -> tuple[int | None, str, str]:
        """(exit status, or None on timeout; stdout; stderr) of ``gdalmdiminfo -detailed URL``: the tool's
        own calls in a bindings worker where the bindings are installed, else the tool itself."""
        pool = self._workers()
        if pool is None:
            try:
                done = subprocess.run(["gdalmdiminfo", "-detailed", url], check=False, capture_output=True,
                                      text=True, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                return None, "", ""
            return done.returncode, done.stdout, done.stderr
        try:
            status, out, err = pool.call({"url": url}, self.timeout)
        except WorkerProtocolError as exc:  # the worker was replaced; this read fails, the next is clean
            return 1, "", f"{exc}\n{exc.stderr.decode('utf-8', 'replace')}"
        return status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def read(self, url: str) -> Dataset:
        status, stdout, stderr = self.mdiminfo(url)
        if status is None:
            raise RuntimeError(f"gdalmdiminfo timed out after {self.timeout:g} s")
        if status != 0 or not stdout.strip():
            said = stderr.strip()
            raise RuntimeError(f"gdalmdiminfo exit {status}: {said.splitlines()[0] if said else ''}")
        errors = [line for line in stderr.splitlines() if line.startswith("ERROR")]
        doc = json.loads(stdout)
        dataset = Dataset(self._group(doc))
        if errors:
            dataset.root.attributes["__gdal_errors__"] = Attribute("char", "; ".join(errors))
        return dataset

    def _group(self, doc: dict[str, Any]) -> Group:
        group = Group(attributes=self._attrs(doc.get("attributes", {})))
        for name, arr in (doc.get("arrays") or {}).items():
            dtype = arr.get("datatype")
            values = arr.get("values")
            if isinstance(dtype, str) and dtype in GDAL_TYPES and values is not None:
                data = np.array(values, dtype=GDAL_TYPES[dtype])
            elif values is not None:
                data = np.array([str(v) for v in np.ravel(values)], dtype=object)
            else:
                data = np.zeros(0)
            group.variables[name] = variable_from_values(data, self._attrs(arr.get("attributes", {})))
        for name, sub in (doc.get("groups") or {}).items():
            group.groups[name] = self._group(sub)
        return group

    @staticmethod
    def _attrs(raw: dict[str, Any]) -> dict[str, Attribute]:
        return untyped_attributes({n: a.get("value") if isinstance(a, dict) else a for n, a in raw.items()})
