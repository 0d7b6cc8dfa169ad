"""A small real HTTP API for the OpenAPI tests: a raw ASGI app with its OpenAPI 3.1 document,
served by hypercorn on 127.0.0.1 in the test's own Trio run (so the test sees what it saw)."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Items", "version": "1.2.0"},
    "paths": {
        "/items/{item_id}": {
            "get": {
                "operationId": "getItem",
                "summary": "One item by id",
                "parameters": [
                    {
                        "name": "item_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer"},
                    }
                ],
                "responses": {
                    "200": {
                        "description": "the item",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Item"}}
                        },
                    },
                    "404": {"description": "no such item"},
                },
            }
        },
        "/items": {
            "post": {
                "operationId": "createItem",
                "parameters": [
                    {"name": "name", "in": "query", "schema": {"type": "string"}},
                    {"name": "X-Request-Tag", "in": "header", "schema": {"type": "string"}},
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/NewItem"}}
                    },
                },
                "responses": {
                    "201": {
                        "description": "what was made",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/tree": {
            "get": {
                "operationId": "getTree",
                "responses": {
                    "200": {
                        "description": "a recursive answer",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                        },
                    }
                },
            }
        },
        "/tags": {
            "get": {
                "responses": {
                    "200": {
                        "description": "a list, so a wrapped output",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"type": "string"}}
                            }
                        },
                    }
                },
            }
        },
        "/whoami": {
            "get": {
                "operationId": "whoami",
                "responses": {
                    "200": {
                        "description": "the Authorization header the API saw",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/slow": {
            "get": {
                "operationId": "slow",
                "responses": {"200": {"description": "never, in the tests"}},
            }
        },
    },
    "components": {
        "schemas": {
            "Item": {
                "type": "object",
                "required": ["id", "name"],
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
            },
            "NewItem": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
            },
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                },
            },
        }
    },
}


@attrs.define
class Api:
    """What the API saw, for the tests to assert on."""

    requests: list[dict[str, Any]] = attrs.field(factory=list)
    slow_started: trio.Event = attrs.field(factory=trio.Event)
    slow_disconnected: trio.Event = attrs.field(factory=trio.Event)
    url: str = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        path, method = scope["path"], scope["method"]
        if path != "/slow":
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.requests.append(
            {
                "method": method,
                "path": path,
                "query": scope["query_string"].decode(),
                "headers": headers,
                "body": body,
            }
        )
        if path == "/slow":
            self.slow_started.set()
            while (await receive())["type"] != "http.disconnect":
                pass
            self.slow_disconnected.set()
            return
        if path.startswith("/items/"):
            item = path.removeprefix("/items/")
            if item == "7":
                return await _answer(send, 200, {"id": 7, "name": "seven"})
            if item == "8":  # an answer that breaks the document's promise
                return await _answer(send, 200, {"id": "eight"})
            return await _answer(send, 404, {"detail": f"no item {item}"})
        if path == "/items" and method == "POST":
            return await _answer(
                send, 201, {"made": json.loads(body), "query": scope["query_string"].decode()}
            )
        if path == "/tree":
            return await _answer(send, 200, {"name": "root", "children": [{"name": "leaf"}]})
        if path == "/tags":
            return await _answer(send, 200, ["a", "b"])
        if path == "/openapi.json":
            return await _answer(send, 200, DOCUMENT)
        if path == "/whoami":
            return await _answer(send, 200, {"authorization": headers.get("authorization")})
        await _answer(send, 404, {"detail": "not found"})


async def _answer(send: Any, status: int, value: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(value).encode()})


@asynccontextmanager
async def serving_api() -> AsyncIterator[Api]:
    """The API on hypercorn, 127.0.0.1, a free port; ``api.url`` is its base URL."""
    api = Api()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    app: Any = api  # hypercorn's ASGI types name each event; the app reads plain dicts
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            functools.partial(serve, app, config, shutdown_trigger=stop.wait)
        )
        api.url = binds[0]
        try:
            yield api
        finally:
            stop.set()
