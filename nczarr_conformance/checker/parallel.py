"""``nczarr-check --deep`` on dask.distributed: chunks decoded by the workers, the report unchanged.

The client lists and parses everything as the serial run does and makes the same list
of chunks to decode (checker/chunks.py); only the reading and decoding move to the
workers, in batches, each worker opening the store once. Outcomes come back in the
order of the list, so findings, their order and the objects-read count are those of
the serial run.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from nczarr_conformance.checker.chunks import DecodeJob, DecodeMap, Outcome, decode_all
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.urls import StoreSpec

BATCHES_PER_WORKER = 4  # enough to even out uneven batches, few enough to keep scheduling cheap
MIN_BATCH = 32

_STORES: dict[str, Store] = {}  # by repr(spec): a spec holds a dict, so it is not hashable


def decode_batch(jobs: list[DecodeJob], spec: StoreSpec) -> list[Outcome]:
    """A worker task: decode these chunks of the store ``spec`` names (opened once per worker)."""
    store = _STORES.get(repr(spec))
    if store is None:
        store = _STORES[repr(spec)] = open_store(spec)
    return decode_all(store, jobs)


def decode_map(client: Any, spec: StoreSpec) -> DecodeMap:
    """A DecodeMap that runs on ``client``'s cluster (paths made absolute: workers may start elsewhere)."""
    if spec.kind in ("file", "zip"):
        spec = replace(spec, path=os.path.abspath(spec.path))

    def run(jobs: list[DecodeJob]) -> list[Outcome]:
        if not jobs:
            return []
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        size = max(MIN_BATCH, -(-len(jobs) // (workers * BATCHES_PER_WORKER)))
        batches = [jobs[i:i + size] for i in range(0, len(jobs), size)]
        results: list[list[Outcome]] = client.gather(client.map(decode_batch, batches, spec=spec, pure=False))
        return [outcome for batch in results for outcome in batch]

    return run
