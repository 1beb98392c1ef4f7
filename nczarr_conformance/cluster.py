"""A dask.distributed client for the commands that fan out (``--concat``, ``nczarr-check --deep``).

Either an existing cluster (``--scheduler ADDRESS``: its workers must see the same files,
and for S3 the same ``AWS_*`` environment) or a ``LocalCluster`` of worker *processes*
(one per core unless ``--workers N``), which inherit this process's environment, so an
S3 endpoint and credentials set for the command are the workers' too. The cluster a
command starts is closed when the command ends, whatever the reason Python sees (an
interrupt or SIGTERM included), and its worker processes with it; a command killed
outright (SIGKILL) cannot close it (the next run removes what it left in the output's
directory, not its processes). dask is an optional extra
(``pip install nczarr-conformance[dask]``) imported only here, only when asked.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import UsageError


@contextmanager
def open_client(scheduler: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` on ``scheduler``, or on a LocalCluster of ``workers`` processes."""
    import importlib

    try:
        distributed: Any = importlib.import_module("distributed")  # untyped: used through Any
    except ImportError:
        raise UsageError("dask.distributed is not installed: pip install 'nczarr-conformance[dask]'") from None
    if scheduler and workers:
        raise UsageError("--scheduler and --workers exclude each other (the cluster decides its workers)")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: at least 1")
    cluster = None
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"{scheduler}: cannot reach the dask scheduler ({exc})") from exc
    else:
        n = workers or os.cpu_count() or 1
        # one single-threaded process per worker: HDF5 and netCDF4 are not thread-safe, and
        # processes are what a real cluster has; its HTTP server on a free local port (8787 may be taken)
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address="127.0.0.1:0", silence_logs=50)
        client = distributed.Client(cluster)
    try:
        yield client
    finally:
        try:
            client.close()
        finally:
            if cluster is not None:
                cluster.close()
