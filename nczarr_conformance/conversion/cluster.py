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

Interrupts, and why they are held at two moments: Ctrl-C sends SIGINT to the whole
foreground process group, workers included, and a worker process taking it prints its
own tracebacks onto the terminal the command shares. So the cluster is started with
SIGINT *blocked* in the starting thread: the cluster's threads inherit the mask, the
worker processes they spawn inherit it through exec, and the workers never take Ctrl-C
(the command stops them itself). While the cluster starts, and while it is closed, a
signal is recorded rather than raised (a LocalCluster cut half-way through its start
cannot be closed and dask's exit hook prints a traceback about it); it is raised as
soon as there is a whole cluster to close, so the command still stops with its one line.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nczarr_conformance import safety
from nczarr_conformance.errors import UsageError

WORKER_STOP_SECONDS = 1.0  # a worker still busy when the command's cluster closes is killed after 0.8 of this


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
    cluster = client = None
    try:
        with _signals_held():
            cluster, client = _start(distributed, scheduler, workers)
            _quiet_when_stopped(client)
        safety.raise_if_interrupted()  # a signal during the start, now that there is a whole cluster to close
        yield client
    finally:
        with safety.critical():  # a second Ctrl-C must not cut the close short: no worker outlives the run
            _close(client, cluster)


def _start(distributed: Any, scheduler: str | None, workers: int | None) -> tuple[Any, Any]:
    """(cluster or None, client): a client of ``scheduler``, or of a LocalCluster this command owns."""
    if scheduler:
        try:
            return None, distributed.Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"{scheduler}: cannot reach the dask scheduler ({exc})") from exc
    n = workers or os.cpu_count() or 1
    # one single-threaded process per worker: HDF5 and netCDF4 are not thread-safe, and
    # processes are what a real cluster has; its HTTP server on a free local port (8787 may be taken)
    cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                       dashboard_address="127.0.0.1:0", silence_logs=50)
    try:
        return cluster, distributed.Client(cluster)
    except BaseException:
        cluster.close()
        raise


def _close(client: Any, cluster: Any) -> None:
    try:
        if client is not None:
            client.close()
    finally:
        if cluster is not None:
            _stop_workers(cluster)
            cluster.close()


def _stop_workers(cluster: Any) -> None:
    """Each worker process stopped within ``WORKER_STOP_SECONDS``, busy or not.

    When the command's cluster is closed nothing it computes is wanted any more: the write
    was committed, or it is aborted right after (the tree built aside removed, the S3 keys
    deleted). dask's own close retires busy workers gracefully and kills them only after 4 s,
    which is how long Ctrl-C took to return; a nanny closed with a short timeout kills its
    worker sooner, and the cluster's close then finds it closed.
    """
    import asyncio

    nannies = list(getattr(cluster, "workers", {}).values())

    async def close_all() -> None:
        await asyncio.gather(*(n.close(timeout=WORKER_STOP_SECONDS) for n in nannies), return_exceptions=True)

    with contextlib.suppress(Exception):  # the cluster's own close, next, still runs and reports
        cluster.sync(close_all)


def _quiet_when_stopped(client: Any) -> None:
    """Once a signal stops the run, the client's loop reports nothing more.

    The client waits on many futures at once; cut short, those waits end with dask's own
    ``AllExit`` or cancellation when the client closes, and asyncio logs each one as "Task
    exception was never retrieved" with a traceback. They are the consequence of our own
    stop, not news: the command's one line says what happened.
    """
    loop = getattr(client.loop, "asyncio_loop", None)
    if loop is None:
        return
    previous = loop.get_exception_handler()

    def handler(lp: Any, context: dict[str, Any]) -> None:
        if safety.received() is not None:
            return
        if previous is not None:
            previous(lp, context)
        else:
            lp.default_exception_handler(context)

    loop.set_exception_handler(handler)


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT blocked (inherited by the threads and processes started here), SIGINT and SIGTERM recorded."""
    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
    if main:
        # multiprocessing starts its resource tracker with SIGINT blocked and then *unblocks* SIGINT in
        # the calling thread; started here first, it is found running later and the mask stays
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    with safety.critical():
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if main else None
        try:
            yield
        finally:
            if old is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a pending SIGINT lands now: recorded
