"""A ``Server`` serving an HTTP API from its OpenAPI document (``Server.from_openapi``).

Each operation is a tool registered with a hand-written input schema (so arguments are checked
and refused exactly as any hand-written tool's, SEP-1303), or a resource or template by
:class:`Route` rules. A call sends one request with the configured ``httpx.AsyncClient`` inside
the tool's own task: when the MCP request is cancelled, Trio cancels the HTTP request with it.
What the API answers becomes the result: a 2xx its content (and structured content when the
document gives a JSON schema), anything else a tool error the model can read.
"""

from __future__ import annotations

import inspect
import json
import re
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import jsonschema

from ..protocol import INTERNAL_ERROR, CallToolResult, ProtocolError, TextContent, ToolAnnotations
from ..server import Context, ResourceNotFound, Server
from ._document import OpenApiError, load_document
from ._operations import Operation, operations
from ._routes import Route, kind_of

__all__ = ["server_from_openapi"]

#: How much of an error's body the model is shown.
EXCERPT_CHARS = 500
#: The largest response body read (a larger one is a tool error, not a memory problem).
MAX_RESPONSE_BYTES = 10 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

#: ``upstream_headers``: extra headers for one call, from its context (the caller).
HeadersFor = Callable[[Context], Mapping[str, str]]


def server_from_openapi(
    document: Mapping[str, Any] | str | Path,
    client: httpx.AsyncClient | None = None,
    *,
    base_url: str | None = None,
    name: str | None = None,
    version: str | None = None,
    routes: Sequence[Route] = (),
    uri_scheme: str = "api",
    upstream_headers: HeadersFor | None = None,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    **server_options: Any,
) -> Server:
    """See :meth:`trio_mcp.Server.from_openapi`."""
    if "lifespan" in server_options:
        raise TypeError("Server.from_openapi(lifespan=...) is not supported: the import uses it")
    upstream = _Upstream(client, base_url, max_response_bytes, upstream_headers)
    remote = isinstance(document, str) and document.startswith(("http://", "https://"))
    loaded = None
    if not remote:
        loaded = _load_local(document)
        upstream.default_base(loaded)
    title = loaded.get("info", {}).get("title") if loaded else None
    server = Server(
        name or (title if isinstance(title, str) and title else "openapi"),
        version or str((loaded or {}).get("info", {}).get("version") or "0.0.0"),
        lifespan=upstream.lifespan,
        **server_options,
    )
    builder = _Builder(server, upstream, list(routes), uri_scheme)
    if loaded is not None:
        builder.add(loaded)
        upstream.loaded = True
    else:
        assert isinstance(document, str)
        upstream.pending = (document, builder)
    return server


def _load_local(document: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    if isinstance(document, Mapping):
        return load_document(document)
    path = Path(document)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise OpenApiError(
            f"cannot read the OpenAPI document {str(path)!r}: {exc.strerror}"
        ) from None
    return load_document(text, str(path))


@attrs.define(eq=False)
class _Upstream:
    """The HTTP side: the client (given, or made here and owned for the lifespan)."""

    given: httpx.AsyncClient | None
    base_url: str | None
    max_response_bytes: int
    headers_for: HeadersFor | None
    client: httpx.AsyncClient | None = None
    loaded: bool = False
    pending: tuple[str, _Builder] | None = None
    holds: int = 0

    def __attrs_post_init__(self) -> None:
        if self.given is not None and self.base_url is not None:
            raise TypeError("Server.from_openapi takes client= or base_url=, not both")
        self.client = self.given

    def default_base(self, document: Mapping[str, Any]) -> None:
        """Without a client or a base URL, the document's first absolute server URL."""
        if self.given is not None or self.base_url is not None:
            return
        servers = document.get("servers")
        url = servers[0].get("url") if isinstance(servers, list) and servers else None
        if not isinstance(url, str) or not url.startswith(("http://", "https://")) or "{" in url:
            raise OpenApiError(
                "no base URL: give Server.from_openapi a client (httpx.AsyncClient(base_url=...)) "
                "or base_url=, the document names no absolute server URL",
                "#/servers",
            )
        self.base_url = url

    @asynccontextmanager
    async def lifespan(self, server: Server) -> AsyncIterator[None]:
        owned = self.given is None and self.holds == 0
        if owned:
            if self.base_url is None and self.pending is not None:
                self.base_url = _origin(self.pending[0])
            self.client = httpx.AsyncClient(base_url=self.base_url or "")
        self.holds += 1
        try:
            if not self.loaded and self.pending is not None:
                url, builder = self.pending
                assert self.client is not None
                response = await self.client.get(url)
                if response.status_code != 200:
                    raise OpenApiError(
                        f"fetching the OpenAPI document {url} answered HTTP {response.status_code}"
                    )
                builder.add(load_document(response.content, url))
                self.loaded = True
            yield None
        finally:
            self.holds -= 1
            if owned and self.client is not None:
                await self.client.aclose()
                self.client = None

    async def call(self, operation: Operation, values: Mapping[str, Any], ctx: Context) -> _Answer:
        """Send ``operation`` with ``values`` (checked arguments); the answer or what failed."""
        client = self.client
        if client is None:
            raise RuntimeError("the OpenAPI server's HTTP client is not open (serve the server)")
        request = _request(client, operation, values)
        if self.headers_for is not None:
            request.headers.update(self.headers_for(ctx))
        what = f"{operation.method} {operation.path}"
        try:
            response = await client.send(request, stream=True)
            try:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > self.max_response_bytes:
                        return _Answer(
                            error=f"{what}: the API's answer is larger than "
                            f"{self.max_response_bytes} bytes"
                        )
            finally:
                await response.aclose()
        except httpx.TimeoutException:
            return _Answer(error=f"{what}: the API did not answer in time (timed out)")
        except httpx.HTTPError as exc:
            return _Answer(error=f"{what}: could not reach the API ({type(exc).__name__})")
        return _Answer(response=response, body=bytes(body), what=what)


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@attrs.frozen
class _Answer:
    response: httpx.Response | None = None
    body: bytes = b""
    what: str = ""
    error: str | None = None

    @property
    def failure(self) -> str | None:
        """What the model reads when the call did not succeed."""
        if self.error is not None:
            return self.error
        assert self.response is not None
        if 200 <= self.response.status_code < 300:
            return None
        code = self.response.status_code
        status = f"HTTP {code} {httpx.codes.get_reason_phrase(code)}".strip()
        excerpt = _excerpt(self.body)
        return f"{self.what}: {status}" + (f": {excerpt}" if excerpt else "")

    def json(self) -> tuple[bool, Any]:
        if not self.body.strip():
            return False, None
        try:
            return True, json.loads(self.body)
        except ValueError:
            return False, None

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _excerpt(body: bytes) -> str:
    text = _CONTROL.sub("", body.decode("utf-8", "replace")).strip()
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."


# -- the request --------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def _joined(value: Any, explode: bool, sep: str = ",") -> str:
    if isinstance(value, list):
        return sep.join(_text(v) for v in value)
    if isinstance(value, dict):
        if explode:
            return sep.join(f"{k}={_text(v)}" for k, v in value.items())
        return sep.join(f"{k}{sep}{_text(v)}" for k, v in value.items())
    return _text(value)


def _query(
    name: str, value: Any, style: str, explode: bool
) -> list[tuple[str, str | int | float | bool | None]]:
    if isinstance(value, list):
        if style == "form" and explode:
            return [(name, _text(v)) for v in value]
        sep = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(style, ",")
        return [(name, sep.join(_text(v) for v in value))]
    if isinstance(value, dict):
        if style == "deepObject":
            return [(f"{name}[{k}]", _text(v)) for k, v in value.items()]
        if explode:
            return [(str(k), _text(v)) for k, v in value.items()]
        return [(name, _joined(value, False))]
    return [(name, _text(value))]


def _path_value(name: str, value: Any, style: str, explode: bool) -> str:
    quote = urllib.parse.quote
    if style == "label":
        sep = "." if explode else ","
        return "." + sep.join(quote(p, safe="=") for p in _joined(value, explode).split(","))
    if style == "matrix":
        if isinstance(value, list) and explode:
            return "".join(f";{name}={quote(_text(v), safe='')}" for v in value)
        return f";{name}={quote(_joined(value, explode), safe=',=')}"
    return quote(_joined(value, explode), safe=",=")


def _request(client: httpx.AsyncClient, op: Operation, values: Mapping[str, Any]) -> httpx.Request:
    path = op.path
    query: list[tuple[str, str | int | float | bool | None]] = []
    headers: dict[str, str] = {}
    cookies: list[str] = []
    body: dict[str, Any] = {}
    whole: Any = None
    has_whole = False
    for arg in op.arguments:
        if arg.name not in values or (values[arg.name] is None and arg.location != "whole body"):
            continue
        value = values[arg.name]
        if arg.location == "path":
            path = path.replace(
                f"{{{arg.wire}}}", _path_value(arg.wire, value, arg.style, arg.explode)
            )
        elif arg.location == "query":
            query += _query(arg.wire, value, arg.style, arg.explode)
        elif arg.location == "header":
            headers[arg.wire] = _joined(value, arg.explode)
        elif arg.location == "cookie":
            cookies.append(f"{arg.wire}={urllib.parse.quote(_joined(value, arg.explode), safe='')}")
        elif arg.location == "body":
            body[arg.wire] = value
        else:
            whole, has_whole = value, True
    if cookies:
        headers["Cookie"] = "; ".join(cookies)
    content: Any = None
    if op.body_media is not None and (has_whole or body):
        payload = whole if has_whole else body
        headers["Content-Type"] = op.body_media
        if op.body_media == "application/x-www-form-urlencoded":
            content = urllib.parse.urlencode(
                [(k, _text(v)) for k, v in (payload.items() if isinstance(payload, dict) else ())]
            )
        elif op.body_media == "text/plain":
            content = _text(payload)
        else:
            content = json.dumps(payload, ensure_ascii=False).encode()
    headers.setdefault("Accept", "application/json" if op.returns_json else "*/*")
    # The path is relative to the client's base URL (its own path kept: /api + /pets).
    return client.build_request(
        op.method,
        path.lstrip("/") if client.base_url.path.endswith("/") else path,
        params=query or None,
        headers=headers,
        content=content,
    )


# -- tools, resources, templates ----------------------------------------------------------------


@attrs.define(eq=False)
class _Builder:
    server: Server
    upstream: _Upstream
    routes: list[Route]
    uri_scheme: str

    def add(self, document: Mapping[str, Any]) -> None:
        excluded = [r for r in self.routes if r.kind == "exclude"]
        skip = lambda method, path, tags: any(  # noqa: E731
            r.selects(method, path, tags) for r in excluded
        )
        for operation in operations(document, skip):
            kind = kind_of(operation, self.routes)
            if kind == "tool":
                self.tool(operation)
            elif kind == "resource":
                self.resource(operation, self.uri(operation.path))
            elif kind == "template":
                self.template(operation)

    def uri(self, path: str) -> str:
        return f"{self.uri_scheme}://{path.lstrip('/')}"

    def tool(self, op: Operation) -> None:
        upstream = self.upstream
        output = op.output_schema
        check = jsonschema.Draft202012Validator(output) if output is not None else None

        async def call(*args: Any, **kwargs: Any) -> CallToolResult:
            arguments, context = _split(args, kwargs)
            answer = await upstream.call(op, arguments, context)
            failure = answer.failure
            if failure is not None:
                return CallToolResult(content=[TextContent(failure)], is_error=True)
            is_json, value = answer.json()
            if check is None or not is_json:
                text = answer.text()
                if not text and output is not None:
                    return _error(f"{answer.what}: the API answered without the JSON it documents")
                return CallToolResult(content=[TextContent(text)] if text else [])
            structured = {"result": value} if op.wraps_output else value
            problem = jsonschema.exceptions.best_match(check.iter_errors(structured))
            if problem is not None:
                where = "/".join(str(p) for p in problem.absolute_path) or "the top level"
                return _error(
                    f"{answer.what}: the API's answer does not match its documented schema "
                    f"at {where}: {_excerpt(problem.message.encode())}"
                )
            return CallToolResult(
                content=[TextContent(answer.text())], structured_content=structured
            )

        # The whole arguments object arrives as one parameter, named unlike any property.
        param = "arguments"
        while param in op.input_schema.get("properties", {}):
            param += "_"
        call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(param, inspect.Parameter.POSITIONAL_OR_KEYWORD),
                inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            ]
        )
        call.__annotations__ = {param: dict, "context": Context, "return": CallToolResult}
        method = op.method
        self.server.tool(
            name=op.name,
            description=op.description,
            input_schema=op.input_schema,
            output_schema=output,
            annotations=ToolAnnotations(
                read_only_hint=method in ("GET", "HEAD", "OPTIONS") or None,
                destructive_hint=True if method == "DELETE" else None,
                idempotent_hint=method in ("GET", "HEAD", "OPTIONS", "PUT", "DELETE") or None,
                open_world_hint=True,
            ),
            meta={"openapi": {"method": method, "path": op.path}},
        )(call)

    def resource(self, op: Operation, uri: str, variables: Mapping[str, str] | None = None) -> None:
        upstream = self.upstream
        mime = "application/json" if op.returns_json else None

        async def read(context: Context, **given: str) -> str:
            values = {(variables or {})[k]: v for k, v in given.items()}
            answer = await upstream.call(op, values, context)
            if answer.response is not None and answer.response.status_code in (404, 410):
                raise ResourceNotFound(_expand(uri, given))
            failure = answer.failure
            if failure is not None:
                raise ProtocolError(INTERNAL_ERROR, failure)
            return answer.text()

        parameters = [
            inspect.Parameter(
                "context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context
            )
        ]
        parameters += [
            inspect.Parameter(v, inspect.Parameter.KEYWORD_ONLY, annotation=str)
            for v in (variables or {})
        ]
        read.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
        read.__annotations__ = {
            "context": Context,
            **dict.fromkeys(variables or {}, str),
            "return": str,
        }
        self.server.resource(uri, name=op.name, description=op.description, mime_type=mime)(read)

    def template(self, op: Operation) -> None:
        variables: dict[str, str] = {}  # variable -> argument
        path = op.path
        for arg in op.arguments:
            if arg.location == "path":
                variable = re.sub(r"\W", "_", arg.wire)
                if not variable.isidentifier() or variable in variables:
                    variable = f"v{len(variables)}_{variable}"
                variables[variable] = arg.name
                path = path.replace(f"{{{arg.wire}}}", f"{{{variable}}}")
        self.resource(op, self.uri(path), variables)


def _split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], Context]:
    """The arguments object and the context, however the server passed them."""
    given = [*args, *kwargs.values()]
    context = next(v for v in given if isinstance(v, Context))
    arguments = next(v for v in given if isinstance(v, dict))
    return arguments, context


def _expand(template: str, values: Mapping[str, str]) -> str:
    for name, value in values.items():
        template = template.replace(f"{{{name}}}", value)
    return template


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text)], is_error=True)
