"""The ASGI binding: Streamable HTTP, HTTP+SSE and WebSocket endpoints, run by hypercorn."""
