"""YAML request bodies as a pure ASGI middleware: ``application/yaml`` or ``text/yaml`` on the POST routes that take
them is parsed with the planner's bounded loader (``planner.files.parse_yaml``: depth, value-count and alias
limits, duplicate keys refused) and handed on as the equivalent JSON, so the route validates it exactly as a
JSON body. It sits inside ``BodySizeLimit``: the body it reads is already bounded. A body that is not UTF-8, not
YAML, over a loader limit, or holds a value JSON cannot carry (NaN, infinity) is a 422 naming the body.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import VALIDATION, FieldError, Problem, problem_response
from planner.files import InputFileError, parse_yaml

YAML_MEDIA_TYPES = frozenset({"application/yaml", "text/yaml"})


def media_type(scope: Scope) -> str:
    """The request's Content-Type without parameters, lower case ('' when there is none)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower()
    return ""


def yaml_to_json(body: bytes) -> bytes:
    """The JSON text of a YAML document; InputFileError or ValueError saying what is wrong."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"body: not UTF-8 text (byte 0x{body[exc.start]:02x} at offset {exc.start})") from exc
    data = parse_yaml(text, "body")
    try:
        return json.dumps(data, allow_nan=False, default=str, separators=(",", ":")).encode()
    except ValueError as exc:
        raise ValueError("body: holds a value JSON cannot carry (NaN or infinity)") from exc


class YamlBodies:
    def __init__(self, app: ASGIApp, paths: frozenset[str]):
        self.app, self.paths = app, paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in self.paths
                or media_type(scope) not in YAML_MEDIA_TYPES):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # client went away: let the app see it
                await self.app(scope, _once(message, receive), send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        try:
            payload = yaml_to_json(b"".join(chunks))
        except ValueError as exc:  # InputFileError is a ValueError
            error = FieldError(location="body", field="", message=str(exc), type="yaml_invalid")
            problem = Problem(type=VALIDATION, title="Invalid input", status=422, detail=error.message,
                              instance=scope.get("path"), errors=[error])
            await problem_response(problem)(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-type", b"content-length")]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        body: Message = {"type": "http.request", "body": payload, "more_body": False}
        await self.app({**scope, "headers": headers}, _once(body, receive), send)


def _once(message: Message, receive: Receive) -> Receive:
    pending = [message]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
