"""Executors for studies, behind the standard ``concurrent.futures.Executor`` interface.

A local process pool (spawned workers, recycled every ``max_tasks_per_child`` scenarios because solver
libraries leak) or Dask distributed (``Client(address).get_executor()``, or a ``LocalCluster`` of
single-threaded worker processes). Local workers die with the process that started them, even when it is
killed with SIGKILL.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

#: times a scenario is resubmitted after its worker process died (a crash breaks the whole pool)
RETRIES_AFTER_CRASH = 1
#: Linux prctl(2) option: the signal a process gets when the thread that started it exits
PR_SET_PDEATHSIG = 1
#: where prctl is missing, how often a worker checks that its parent is alive (s)
PARENT_POLL_S = 1.0


@dataclass(frozen=True)
class ExecutorSpec:
    """Where scenarios run: ``local`` process pool or ``dask`` (``address`` None = a local cluster)."""

    kind: Literal["local", "dask"] = "local"
    workers: int = 2
    address: str | None = None
    max_tasks_per_child: int = 100


class RecyclingProcessPool(ProcessPoolExecutor):
    """A process pool whose workers exit after ``max_tasks_per_child`` tasks and are always replaced.

    CPython 3.11-3.13 may never replace a worker that reached its task limit while tasks are queued
    (the idle-worker semaphore holds stale tokens) and the pool then hangs (gh-115634). The upstream
    fix replaces a dead worker whenever the pool is below ``max_workers``; this does the same.
    """

    def _adjust_process_count(self) -> None:
        if len(self._processes) < self._max_workers:
            self._spawn_process()


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this process as soon as ``parent_pid`` (the study) dies, SIGKILL included.

    Linux: the kernel sends SIGKILL on the parent's death (prctl PR_SET_PDEATHSIG), even mid-solve in C.
    Elsewhere: a daemon thread polls the parent pid. Either way, a parent already gone ends the worker now.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    else:
        threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()
    if os.getppid() != parent_pid:
        os._exit(1)


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


@contextmanager
def open_executor(spec: ExecutorSpec) -> Iterator[Executor]:
    """A ``concurrent.futures.Executor`` for ``spec``; pending work is cancelled on the way out."""
    if spec.kind == "local":
        pool = RecyclingProcessPool(max_workers=spec.workers, mp_context=multiprocessing.get_context("spawn"),
                                    max_tasks_per_child=spec.max_tasks_per_child,
                                    initializer=die_with_parent, initargs=(os.getpid(),))
        try:
            yield pool
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    from distributed import Client, LocalCluster

    cluster = None
    if spec.address is None:
        cluster = LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(spec.address or cluster)
    try:
        yield client.get_executor(pure=False, retries=RETRIES_AFTER_CRASH)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
