"""Which Redis a URL names, and the client that talks to it: one Redis, a Redis Cluster, or a
primary that Redis Sentinel watches.

- ``redis://``, ``rediss://`` (TLS), ``unix://``: one Redis (coredis's ``Redis``).
- ``redis+cluster://[user:password@]host:port[,host:port...][?options]`` (``rediss+cluster``
  for TLS): a Redis Cluster, from its seed nodes (any of them will do; more than one, so the
  start does not depend on one node). coredis's ``RedisCluster`` finds the rest, follows
  ``MOVED`` and ``ASK``, and learns the new layout after a failover or a resharding.
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db][?options]``
  (``rediss+sentinel``): the primary of ``service`` as the Sentinels at those addresses name
  it, found again after a failover. The credentials and TLS are the primary's; the Sentinels
  are asked without them.

Options after ``?`` are coredis's URL options (``?stream_timeout=2``, ``?ssl_cert_reqs=none``).
Every store, the bus and the relay share one pool per URL in a process (:mod:`._hub`), so a
cluster or a sentinel URL is accepted wherever a Redis URL is.

coredis is imported only when a client is opened: a server without Redis never loads it.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

if TYPE_CHECKING:
    import coredis

    #: What every store talks through: one Redis (a Sentinel's primary too) or a cluster.
    Client: TypeAlias = coredis.Redis[bytes] | coredis.RedisCluster[bytes]

__all__ = ["RedisTarget", "check_url", "connect", "parse", "redact"]

#: What a URL may start with, in the order messages name them.
SCHEMES = (
    "redis://",
    "rediss://",
    "unix://",
    "redis+cluster://",
    "rediss+cluster://",
    "redis+sentinel://",
    "rediss+sentinel://",
)
#: The form of a cluster URL, as messages suggest it.
CLUSTER_FORM = "redis+cluster://host:port[,host:port...]"

Kind: TypeAlias = Literal["single", "cluster", "sentinel"]


@attrs.frozen
class RedisTarget:
    """What a Redis URL names: ``kind``; for a cluster or a sentinel URL, the ``nodes`` (seed
    nodes, or Sentinels), the ``base`` URL coredis parses (credentials, TLS, options, database)
    and the Sentinel's ``service``."""

    kind: Kind
    url: str = attrs.field(repr=False)  # both may hold a password
    nodes: tuple[tuple[str, int], ...] = ()
    base: str = attrs.field(default="", repr=False)
    service: str = ""


def check_url(url: str) -> None:
    """ValueError, saying which forms are accepted, unless ``url`` is a Redis URL trio_mcp
    speaks (what a store's constructor calls, so a wrong URL fails before anything starts)."""
    parse(url)


def parse(url: str) -> RedisTarget:
    """What ``url`` names (see the module docstring); ValueError, in words, if nothing."""
    if not url.startswith(SCHEMES):
        raise ValueError(
            "a Redis URL starts with redis://, rediss:// or unix:// (one Redis), "
            "redis+cluster:// (a Redis Cluster) or redis+sentinel:// (a Sentinel's primary), "
            f"not {redact(url)!r}"
        )
    scheme, _, rest = url.partition("://")
    if "+" not in scheme:
        return RedisTarget("single", url)
    plain, _, kind = scheme.partition("+")
    netloc, slash, tail = rest.partition("/")
    path, query_mark, query = tail.partition("?")
    if not slash:
        netloc, query_mark, query = netloc.partition("?")
    userinfo, at, hosts = netloc.rpartition("@")
    nodes = tuple(_node(node, url) for node in hosts.split(",") if node)
    if not nodes:
        raise ValueError(f"a {kind} URL names at least one host:port, not {redact(url)!r}")
    base_netloc = f"{userinfo}{at}{_host_port(nodes[0])}"
    service = ""
    if kind == "sentinel":
        service, _, path = path.partition("/")
        if not service:
            raise ValueError(
                "a sentinel URL names the service after the hosts "
                f"(redis+sentinel://host:port[,host:port...]/service[/db]), not {redact(url)!r}"
            )
    elif path:
        raise ValueError(f"a Redis Cluster has no databases: drop /{path} from {redact(url)!r}")
    base = f"{plain}://{base_netloc}/{path}{query_mark}{query}"
    return RedisTarget("cluster" if kind == "cluster" else "sentinel", url, nodes, base, service)


def _node(text: str, url: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = text, "6379" if "cluster" in url.partition(":")[0] else "26379"
    host = host.strip("[]")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"{text!r} is not host:port in {redact(url)!r}") from None
    if not host or not 0 < number < 65536:
        raise ValueError(f"{text!r} is not host:port in {redact(url)!r}")
    return host, number


def _host_port(node: tuple[str, int]) -> str:
    host, port = node
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def redact(url: str) -> str:
    """``url`` without its password (``redis://user:***@host:port/db``), for messages."""
    scheme, _, rest = url.partition("://")
    netloc = rest.partition("/")[0].partition("?")[0]
    if "," in netloc:  # the hosts of a cluster or of Sentinels: urlsplit takes only one
        userinfo, _, hosts = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        if not colon:
            return url
        return f"{scheme}://{user}:***@{hosts}{rest[len(netloc) :]}"
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<an unparsable Redis URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


@contextlib.asynccontextmanager
async def connect(url: str, **options: Any) -> AsyncIterator[Client]:
    """An open client of the Redis ``url`` names, for the block (coredis's client is a context
    manager owning its connections' tasks); ``options`` go to coredis (``connect_timeout``,
    ``client_name``, ``retry_policy``, ``stream_timeout``)."""
    import coredis

    target = parse(url)
    if target.kind == "single":
        async with coredis.Redis.from_url(url, **options) as client:
            yield client
        return
    from coredis.connection import TCPLocation

    locations = [TCPLocation(host, port) for host, port in target.nodes]
    if target.kind == "cluster":
        async with coredis.RedisCluster.from_url(
            target.base, startup_nodes=locations, **options
        ) as cluster:
            yield cluster
        return
    retry = options.pop("retry_policy", None)
    sentinel_options = {
        key: value
        for key, value in options.items()
        if key in ("connect_timeout", "stream_timeout", "client_name")
    }
    sentinel: coredis.Sentinel[bytes] = coredis.Sentinel(
        locations,
        sentinel_kwargs=sentinel_options,
        **({"retry_policy": retry} if retry is not None else {}),
        **{**_url_options(target.base), **options},
    )
    async with sentinel, sentinel.primary_for(target.service) as primary:
        yield primary


def _url_options(base: str) -> dict[str, Any]:
    """The connection options of a sentinel URL's ``base`` (credentials, TLS, database, the
    query's options), as coredis's own URL parsing gives them."""
    from coredis.pool import ConnectionPool

    kwargs = dict(ConnectionPool.from_url(base).connection_kwargs)
    kwargs.pop("processing_budget", None)  # the throwaway pool's own
    return kwargs
