"""Cancelling solves from another thread.

A caller that may need to stop work (a server whose client left, a study being cancelled, a shutdown) runs it
``with cancellable(token)``; every backend solve in that context registers how to interrupt itself (killing the
child process it solves in) and raises ``SolveCancelled`` once ``token.cancel()`` was called, including every
solve started after it. Without a token nothing changes: the CLI never sets one.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator


class SolveCancelled(Exception):
    """The solve's token was cancelled: its work was dropped."""


class CancelToken:
    """Set once (``cancel``), from any thread; interrupts every solve running under it."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()
        self._lock = threading.RLock()  # RLock: a signal handler may cancel while this thread holds it
        self._interrupts: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def solving(self) -> int:
        """Solves running under this token now (registered interrupts)."""
        with self._lock:
            return len(self._interrupts)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled.set()
            interrupts = list(self._interrupts)
        for interrupt in interrupts:
            interrupt()

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise SolveCancelled("the solve was cancelled")

    @contextmanager
    def interrupting(self, interrupt: Callable[[], None]) -> Iterator[None]:
        """While inside, ``cancel`` calls ``interrupt``; raises SolveCancelled on the way in when already
        cancelled, and on the way out when cancelled meanwhile (also in place of what the interrupt caused)."""
        with self._lock:
            self.raise_if_cancelled()
            self._interrupts.append(interrupt)
        try:
            yield
        except Exception as exc:
            if self.cancelled:
                raise SolveCancelled("the solve was cancelled") from exc
            raise
        finally:
            with self._lock:
                self._interrupts.remove(interrupt)
        self.raise_if_cancelled()


_CURRENT: ContextVar[CancelToken | None] = ContextVar("siliconmix_cancel_token", default=None)


@contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Solves in this context (this thread, or a context copied from it) obey ``token``."""
    reset = _CURRENT.set(token)
    try:
        yield token
    finally:
        _CURRENT.reset(reset)


def current_token() -> CancelToken | None:
    return _CURRENT.get()


@contextmanager
def interrupting(interrupt: Callable[[], None]) -> Iterator[None]:
    """``current token.interrupting(interrupt)``, or nothing without a token."""
    token = _CURRENT.get()
    if token is None:
        yield
        return
    with token.interrupting(interrupt):
        yield
