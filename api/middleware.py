"""Request body limits as a pure ASGI middleware (FastAPI does not apply Starlette's ``max_body_size``).

A declared ``Content-Length`` over the limit is refused before any byte is read; a body without one
(chunked) is read up to the limit and refused as soon as it passes it. A body within the limit is
buffered and replayed to the app, so nothing downstream ever sees more than ``max_body_bytes``. The whole
body must arrive within ``body_timeout_s`` of the request's start: a client that stalls or trickles gets a
408 and its connection is closed.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import TIMEOUT, TOO_LARGE, Problem, problem_response


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int, body_timeout_s: float):
        self.app, self.max_body_bytes, self.body_timeout_s = app, max_body_bytes, body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(scope, receive, send, f"the body declares {declared} bytes")
            return
        chunks, size, more = [], 0, True
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except TimeoutError:
                await self._timed_out(scope, receive, send, size)
                return
            if message["type"] != "http.request":  # client went away: let the app see it
                await self.app(scope, _replay([message], receive), send)
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_body_bytes:
                await self._refuse(scope, receive, send, f"the body passed {self.max_body_bytes} bytes")
                return
            chunks.append(body)
            more = message.get("more_body", False)
        await self.app(scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}], receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, why: str) -> None:
        problem = Problem(type=TOO_LARGE, title="Content Too Large", status=413, instance=scope.get("path"),
                          detail=f"{why}; this service accepts at most {self.max_body_bytes} bytes "
                                 f"(SILICONMIX_MAX_BODY_BYTES)")
        # Connection: close, so the client stops sending the rest of an oversized body
        await problem_response(problem, headers={"Connection": "close"})(scope, receive, send)


    async def _timed_out(self, scope: Scope, receive: Receive, send: Send, size: int) -> None:
        problem = Problem(type=TIMEOUT, title="Request Timeout", status=408, instance=scope.get("path"),
                          detail=f"the body did not arrive within {self.body_timeout_s:g} s ({size} bytes came); "
                                 "SILICONMIX_BODY_TIMEOUT_S")
        await problem_response(problem, headers={"Connection": "close"})(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay
