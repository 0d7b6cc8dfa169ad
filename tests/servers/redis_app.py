"""An ASGI app for plain ``hypercorn --worker-class trio redis_app:app``: a server whose event
store and task store are on the Redis at ``$REDIS_APP_URL``."""

from __future__ import annotations

import os

from trio_mcp import Server
from trio_mcp.http import HttpOptions, ScaleOut
from trio_mcp.redis import RedisEventStore, RedisTaskStore

URL = os.environ["REDIS_APP_URL"]

server = Server("redis_app", task_store=RedisTaskStore(URL))
app = server.http_app(HttpOptions(scale_out=ScaleOut(event_store=RedisEventStore(URL))))
