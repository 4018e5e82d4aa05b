"""Stopping work early: a request's solve when its client disconnects, everything when the server is told to stop.

uvicorn waits for running requests before it runs the app's shutdown, so the app hears SIGTERM/SIGINT itself:
its handler is chained in front of uvicorn's for the app's lifetime and only schedules ``on_stop`` on the
event loop (nothing else runs inside the signal handler).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Callable

from starlette.requests import Request

from planner.solvers.cancel import CancelToken

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def cancel_on_disconnect(request: Request, token: CancelToken) -> None:
    """Cancel ``token`` when the client goes away (run as a task while the request's work runs; its body has been read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            token.cancel()
            return


def on_stop_signals(loop: asyncio.AbstractEventLoop, on_stop: Callable[[], None]) -> Callable[[], None]:
    """Chain a handler for SIGTERM and SIGINT that schedules ``on_stop`` on ``loop``, then calls the previous
    handler (uvicorn's). Returns the function that puts the previous handlers back. Signals can only be
    handled on the main thread: elsewhere (a server in a thread) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handler(sig: int, frame) -> None:
        loop.call_soon_threadsafe(on_stop)
        chained = previous[sig]
        if callable(chained):
            chained(sig, frame)
        elif chained == signal.SIG_DFL and sig == signal.SIGINT:
            raise KeyboardInterrupt

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, chained in previous.items():
            signal.signal(sig, chained)

    return restore
