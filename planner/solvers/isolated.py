"""A backend that solves in a child interpreter: the PuLP backend never shares a process with OR-Tools.

highspy (HiGHS under PuLP) and OR-Tools each ship their own native HiGHS. In one process the second copy
binds to the first one's symbols, and a PuLP/HiGHS solve followed by an OR-Tools/HiGHS solve dies with
SIGSEGV. So the PuLP backend runs in persistent child processes (``python -m planner.solvers.isolated``)
that import nothing but that backend: the parent never loads highspy, whatever it imported first.

Each child serves one solve at a time over its stdin/stdout (length-prefixed pickles of an ``IlpModel`` and
``SolveOptions`` in, a ``SolveResult`` or the exception out); idle children are reused. A child reads EOF and
exits when its parent goes away. A child that dies or overruns its time limit by ``GRACE_S`` answers an
``ERROR`` result (a time-limit overrun is killed), so a caller always gets a ``SolveResult``; a cancelled
token (``planner.solvers.cancel``) kills the child and raises SolveCancelled.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

from planner.milp.model import IlpModel
from planner.solvers.base import SolveOptions, SolveResult, Termination
from planner.solvers.cancel import SolveCancelled, interrupting

#: seconds a child may run past the solve's own time limit (model translation, start-up) before it is killed
GRACE_S = 60.0
_HEADER = struct.Struct("!Q")
_SOURCE_ROOT = str(Path(__file__).resolve().parents[2])


class ChildDied(RuntimeError):
    """The child process exited (or was killed) before it answered."""


def write_frame(stream: BinaryIO, payload: Any) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: BinaryIO) -> Any:
    """The next pickle on ``stream``; EOFError when the other side closed it."""
    header = _read_exactly(stream, _HEADER.size)
    return pickle.loads(_read_exactly(stream, _HEADER.unpack(header)[0]))


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("stream closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Child:
    """One child interpreter serving ``target`` (``module:Backend``); its hello names the backend's engines."""

    def __init__(self, target: str):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_SOURCE_ROOT, os.environ.get("PYTHONPATH")]))}
        # its own process group: a kill reaches the engine processes it starts too (PuLP runs CBC as a program)
        self.process = subprocess.Popen([sys.executable, "-m", "planner.solvers.isolated", target],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
                                        start_new_session=True)
        self.killed = False
        self.hello: dict = self._answer(GRACE_S)

    def solve(self, model: IlpModel, options: SolveOptions) -> SolveResult:
        try:
            write_frame(self.process.stdin, (model, options))
        except OSError as exc:  # a broken pipe: it is gone
            raise ChildDied(self._discard()) from exc
        kind, value = self._answer(options.time_limit_s + GRACE_S)
        if kind == "error":
            raise value
        return value

    def _answer(self, timeout_s: float) -> Any:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s if timeout_s < 1e6 else None)
        if not ready:
            self.kill()
            raise ChildDied(f"no answer within {timeout_s:g} s; {self._discard()}")
        try:
            return read_frame(self.process.stdout)
        except EOFError as exc:
            raise ChildDied(self._discard()) from exc

    def kill(self) -> None:
        """SIGKILL the child and every process it started (its process group); it is never reused."""
        self.killed = True
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:  # already gone
            pass

    def _discard(self) -> str:
        """Reap a dead (or killed) child, close its pipes, and say how it ended."""
        code = self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:  # a broken pipe's unflushed bytes
                pass
        return f"the solver process exited with {code}" + (f" (signal {-code})" if code < 0 else "")

    def close(self) -> None:
        """Close its stdin (it exits at EOF) and reap it."""
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self._discard()


class ChildPool:
    """Idle children of one target, reused; a child in use belongs to one caller (thread-safe)."""

    def __init__(self, target: str):
        self.target = target
        self._idle: list[Child] = []
        self._lock = threading.Lock()

    def acquire(self) -> Child:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.process.poll() is None:
                    return child
                child._discard()
        return Child(self.target)

    def release(self, child: Child) -> None:
        with self._lock:
            self._idle.append(child)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.close()


_POOLS: dict[str, ChildPool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(target: str) -> ChildPool:
    with _POOLS_LOCK:
        if target not in _POOLS:
            _POOLS[target] = ChildPool(target)
        return _POOLS[target]


@atexit.register
def _close_pools() -> None:
    for pool in list(_POOLS.values()):
        pool.close()


class IsolatedBackend:
    """The Backend protocol, answered by ``target`` in a child process."""

    def __init__(self, name: str, target: str):
        self.name, self._pool = name, pool_for(target)
        self._hello: dict | None = None

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(self._describe()["engines"])

    @property
    def default_engine(self) -> str:
        return self._describe()["default_engine"]

    def _describe(self) -> dict:
        if self._hello is None:
            child = self._pool.acquire()
            self._hello = child.hello
            self._pool.release(child)
        return self._hello

    def solve(self, model: IlpModel, options: SolveOptions) -> SolveResult:
        child = self._pool.acquire()
        try:
            with interrupting(child.kill):  # cancelled: the child is killed, SolveCancelled raised
                result = child.solve(model, options)
        except ChildDied as exc:
            return SolveResult(termination=Termination.ERROR, backend=self.name,
                               engine=options.engine or child.hello["default_engine"], message=str(exc))
        except SolveCancelled:
            if not child.killed and child.process.poll() is None:  # cancelled before it was sent anything
                self._pool.release(child)
            else:
                child._discard()
            raise
        except BaseException:
            self._pool.release(child)  # the child answered (an exception of the backend's): it is fine
            raise
        self._pool.release(child)
        return result


_IN_CHILD = False


def in_child() -> bool:
    """True inside a solver child process."""
    return _IN_CHILD


def serve(target: str) -> None:
    """The child's loop: say hello, then answer one solve per frame until stdin closes."""
    global _IN_CHILD
    _IN_CHILD = True
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever native code prints goes to stderr, never into the frames
    module_name, attr = target.split(":")
    backend = getattr(importlib.import_module(module_name), attr)()
    requests = sys.stdin.buffer
    write_frame(channel, {"name": backend.name, "engines": list(backend.engines),
                          "default_engine": backend.default_engine, "pid": os.getpid(),
                          "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("ortools", "pulp", "highspy"))})
    while True:
        try:
            model, options = read_frame(requests)
        except EOFError:
            return
        try:
            answer = ("ok", backend.solve(model, options))
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who raises it
            answer = ("error", exc)
        try:
            write_frame(channel, answer)
        except (pickle.PicklingError, TypeError, AttributeError):
            write_frame(channel, ("error", RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}")))


if __name__ == "__main__":
    # the loop of planner.solvers.isolated, not of this __main__ copy: in_child() must answer for the module the
    # backends import
    importlib.import_module("planner.solvers.isolated").serve(sys.argv[1])
