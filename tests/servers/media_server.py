"""A server for the CLI's tests: an image, a sound, a log message and a binary resource.

It is served with ``trio-mcp serve`` on this file's path (no ``__main__`` block on purpose).
"""

from __future__ import annotations

import base64

from trio_mcp import Context, Server
from trio_mcp.protocol._types import AudioContent, ImageContent, TextContent

#: The first bytes of a PNG and of a WAV file: enough to tell a decoded file from its base64.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)

server = Server("media", "2.5.0")


@server.tool()
def picture() -> list[ImageContent | TextContent]:
    """A tiny image and a caption."""
    return [ImageContent(base64.b64encode(PNG).decode(), "image/png"), TextContent("a caption")]


@server.tool()
def sound() -> AudioContent:
    """A tiny sound."""
    return AudioContent(base64.b64encode(WAV).decode(), "audio/wav")


@server.tool()
async def chatty(word: str, ctx: Context) -> str:
    """Log the word at info and at debug, then return it."""
    await ctx.info(f"heard {word}", logger="media")
    await ctx.debug(f"debug {word}")
    return word


@server.tool()
def typed(count: int, ratio: float, flag: bool, name: str, tags: list[str]) -> str:
    """Report the Python types of what arrived."""
    values = [count, ratio, flag, name, tags]
    return " ".join(f"{type(value).__name__}:{value!r}" for value in values)


@server.resource("media://logo", mime_type="image/png", description="The logo")
def logo() -> bytes:
    return PNG
