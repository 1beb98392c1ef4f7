"""Spec rules of Zarr v3 (the core specification 3.1 and its bytes and sharding codecs, and xarray's
use of ``dimension_names``) × the implementations that write or read v3.

As for the v2 rules (``rules.py``), each result comes from what an implementation really did: a
writer's rules from the ``zarr.json`` documents and chunk objects it wrote in the matrix run (every
case it wrote), a reader's from what it read back from a store built for the rule by zarr-python 3,
the producer of such stores. Which implementation a rule applies to follows from its capabilities
(``writes-zarr-v3``, ``zarr-v3``), never from its id. The spec texts are in
``docs/spec/zarr-v3-excerpts.txt``.
"""
from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance.conformance.rule_context import RuleContext
from nczarr_conformance.peers.base import Peer
from nczarr_conformance.stores import open_store
from nczarr_conformance.zarr3.chain import ARRAY_TO_ARRAY, ARRAY_TO_BYTES

Verdict = tuple[str, str]


def _writes_v3(peer: Peer) -> Verdict | None:
    if not peer.writes:
        return "not-applicable", "does not write"
    if "writes-zarr-v3" not in peer.capabilities:
        return "not-applicable", "writes Zarr v2"
    return None


def _arrays(ctx: RuleContext, peer: Peer) -> Iterator[tuple[str, str, dict[str, Any], Any]]:
    """(case, array path, zarr.json, the open store holding it) of every array ``peer`` wrote in the
    run, by case and path."""
    for (case, writer), url in sorted(ctx.run.stores.items()):
        if writer != peer.id:
            continue
        with open_store(url) as store:
            for key in sorted(store.list_prefix("/")):
                if not key.endswith("/zarr.json"):
                    continue
                raw = store.get(key)
                doc = json.loads(raw) if raw else None
                if isinstance(doc, dict) and doc.get("node_type") == "array":
                    path = key[: -len("/zarr.json")] or "/"
                    yield case, path, doc, store


def _each_array(ctx: RuleContext, peer: Peer, fault_of: Callable[[Any, str, dict[str, Any]], str | None],
                follows: str) -> Verdict:
    """A writer rule held by every array it wrote: deviates at the first array ``fault_of(store, path,
    doc)`` finds at fault, else follows (``follows`` formatted with ``seen``, the arrays judged)."""
    scope = _writes_v3(peer)
    if scope:
        return scope
    seen = 0
    for case, path, doc, store in _arrays(ctx, peer):
        seen += 1
        fault = fault_of(store, path, doc)
        if fault:
            return "deviates", f"case {case}: {fault}"
    if not seen:
        return "skipped", "no v3 array written in the run"
    return "follows", follows.format(seen=seen)


def _chain_fault(codecs: Any) -> str | None:
    """What breaks "array→array codecs, exactly one array→bytes codec, bytes→bytes codecs", or None."""
    if not isinstance(codecs, list) or not codecs:
        return "no codecs"
    names = [c.get("name") if isinstance(c, dict) else c for c in codecs]
    a2b = [i for i, n in enumerate(names) if n in ARRAY_TO_BYTES]
    if len(a2b) != 1:
        return f"{len(a2b)} array→bytes codecs in {names}"
    if any(n not in ARRAY_TO_ARRAY for n in names[: a2b[0]]):
        return f"a bytes→bytes codec before the array→bytes one in {names}"
    if any(n in ARRAY_TO_ARRAY for n in names[a2b[0] + 1:]):
        return f"an array→array codec after the array→bytes one in {names}"
    inner = codecs[a2b[0]]
    if names[a2b[0]] == "sharding_indexed" and isinstance(inner, dict):
        config = inner.get("configuration") or {}
        for part in ("codecs", "index_codecs"):
            fault = _chain_fault(config.get(part))
            if fault:
                return f"sharding {part}: {fault}"
    return None


def v3_codecs(ctx: RuleContext, peer: Peer) -> Verdict:
    def fault_of(store: Any, path: str, doc: dict[str, Any]) -> str | None:
        fault = _chain_fault(doc.get("codecs"))
        return f"{path}: {fault}" if fault else None

    return _each_array(ctx, peer, fault_of, "{seen} arrays in every case written: one array→bytes codec each, in order")


def _itemsize(data_type: Any) -> int:
    try:
        return int(np.dtype(data_type).itemsize) if isinstance(data_type, str) else 0
    except TypeError:
        return 0  # string, bytes and other extension types: no byte order


def _bytes_codecs(codecs: Any) -> Iterator[dict[str, Any]]:
    for codec in codecs if isinstance(codecs, list) else []:
        if not isinstance(codec, dict):
            continue
        if codec.get("name") == "bytes":
            yield codec
        elif codec.get("name") == "sharding_indexed":
            yield from _bytes_codecs((codec.get("configuration") or {}).get("codecs"))


def v3_endian(ctx: RuleContext, peer: Peer) -> Verdict:
    scope = _writes_v3(peer)
    if scope:
        return scope
    seen = 0
    for case, path, doc, _ in _arrays(ctx, peer):
        if _itemsize(doc.get("data_type")) < 2:
            continue
        for codec in _bytes_codecs(doc.get("codecs")):
            seen += 1
            endian = (codec.get("configuration") or {}).get("endian")
            if endian not in ("little", "big"):
                return "deviates", (f"case {case}: {path} ({doc.get('data_type')}): bytes codec without an endian "
                                    f"({codec})")
    if not seen:
        return "skipped", "no multi-byte array written with the bytes codec"
    return "follows", f"{seen} bytes codecs of multi-byte arrays, each naming its endian"


def v3_dims(ctx: RuleContext, peer: Peer) -> Verdict:
    scope = _writes_v3(peer)
    if scope:
        return scope
    # case groups-nested: the variables' netCDF dimension names
    wanted = {"/top": ["x"], "/g1/w": ["x", "y"], "/g1/g2/deep": ["y"]}
    docs = {path: doc for case, path, doc, _ in _arrays(ctx, peer) if case == "groups-nested"}
    if not docs:
        docs = {path: doc for case, path, doc, _ in _arrays(ctx, peer) if case == "numeric-types"}
        if not docs:
            return "skipped", "cases groups-nested and numeric-types: nothing written"
        names = {path: doc.get("dimension_names") for path, doc in docs.items()}
        ok = all(n == ["x"] for n in names.values())
        return ("follows" if ok else "deviates"), f"case numeric-types: dimension_names {names}"
    names = {path: docs[path].get("dimension_names") if path in docs else "not written" for path in wanted}
    legacy = {path: (docs[path].get("attributes") or {}).get("_ARRAY_DIMENSIONS") for path in wanted if path in docs}
    ok = names == wanted and not any(legacy.values())
    extra = f"; _ARRAY_DIMENSIONS {legacy}" if any(legacy.values()) else ""
    return ("follows" if ok else "deviates"), f"case groups-nested: dimension_names {names}{extra}"


def _chunk_keys_fault(store: Any, path: str, doc: dict[str, Any]) -> str | None:
    """The first object in an array's folder that its ``chunk_key_encoding`` cannot name, or None."""
    encoding = doc.get("chunk_key_encoding") or {}
    name = encoding.get("name")
    separator = (encoding.get("configuration") or {}).get("separator", "/" if name == "default" else ".")
    ndim = len(doc.get("shape") or [])
    if name == "default":
        pattern = "c" + "".join(re.escape(separator) + r"\d+" for _ in range(ndim))
    elif name == "v2":
        pattern = re.escape(separator).join([r"\d+"] * ndim) if ndim else "0"
    else:
        return f"{path}: chunk_key_encoding {name!r}"
    prefix = path.rstrip("/") + "/"
    for key in store.list_prefix(prefix):
        rest = key[len(prefix):]
        if rest != "zarr.json" and not re.fullmatch(pattern, rest):
            return f"{key} is not a chunk key of encoding {name!r} (separator {separator!r})"
    return None


def v3_keys(ctx: RuleContext, peer: Peer) -> Verdict:
    return _each_array(ctx, peer, _chunk_keys_fault,
                       "every object in the folders of {seen} arrays is named by its chunk_key_encoding")


# ---- readers ------------------------------------------------------------------------------------------

def _reads_v3(peer: Peer) -> Verdict | None:
    if not peer.reads:
        return "not-applicable", "does not read"
    if "zarr-v3" not in peer.capabilities:
        return "not-applicable", "does not declare zarr-v3"
    if importlib.util.find_spec("zarr") is None:
        return "skipped", "zarr-python, which writes this rule's input, is not installed"
    return None


SHARD_VALUES = np.arange(60, dtype="<i4").reshape(6, 10)


def _write_sharded(path: Path) -> None:
    import zarr

    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    array = group.create_array("s", shape=(6, 10), chunks=(2, 5), shards=(6, 10), dtype="<i4", fill_value=-1,
                               dimension_names=["y", "x"])
    array[...] = SHARD_VALUES


def _write_missing(path: Path) -> None:
    import zarr

    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    array = group.create_array("m", shape=(8,), chunks=(2,), dtype="<f8", fill_value=7.5, dimension_names=["t"])
    array[2:4] = [1.0, 2.0]  # chunk 1 only: chunks 0, 2 and 3 are never stored


def _read_one(ctx: RuleContext, peer: Peer, name: str, make: Any, var: str) -> tuple[np.ndarray | None, str]:
    try:
        model = peer.read(str(ctx.built(name, make)))
        return np.asarray(model.root.variables[var].data), ""
    except Exception as exc:  # a reader failing on the rule's store is the finding
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return None, f"{type(exc).__name__}: {text}"


def v3_shard_read(ctx: RuleContext, peer: Peer) -> Verdict:
    scope = _reads_v3(peer)
    if scope:
        return scope
    got, failed = _read_one(ctx, peer, "V3.shard", _write_sharded, "s")
    if got is None:
        return "deviates", f"s(6,10) in one shard of 2x5 inner chunks (zarr-python 3): reading failed: {failed}"
    ok = got.shape == SHARD_VALUES.shape and np.array_equal(got, SHARD_VALUES)
    return ("follows" if ok else "deviates"), (f"s(6,10) in one shard of 2x5 inner chunks (zarr-python 3): read "
                                               f"{'equal' if ok else f'as {got.ravel()[:6].tolist()}…'}")


def v3_missing_read(ctx: RuleContext, peer: Peer) -> Verdict:
    scope = _reads_v3(peer)
    if scope:
        return scope
    got, failed = _read_one(ctx, peer, "V3.missing", _write_missing, "m")
    want = [7.5, 7.5, 1.0, 2.0, 7.5, 7.5, 7.5, 7.5]
    if got is None:
        return "deviates", f"m(8), only chunk 1 stored, fill_value 7.5: reading failed: {failed}"
    values = [float(v) for v in got.ravel().tolist()]
    return ("follows" if values == want else "deviates"), (f"m(8), only chunk 1 stored, fill_value 7.5: read "
                                                           f"{values}")
