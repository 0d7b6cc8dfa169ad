"""``Image``, ``Audio`` and ``File``: what a tool returns becomes the right content block."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from trio_mcp import (
    Audio,
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    File,
    Image,
    ImageContent,
    Server,
    TextContent,
    open_client,
)
from trio_mcp.protocol import to_wire

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 16


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_image_from_bytes_takes_its_type_from_the_bytes_or_as_given() -> None:
    assert Image(PNG).to_content() == ImageContent(b64(PNG), "image/png")
    assert Image(b"GIF89a...").mime_type == "image/gif"
    assert Image(b"\x00\x01", mime_type="image/x-raw").to_content().mime_type == "image/x-raw"
    with pytest.raises(ValueError, match="give mime_type="):
        Image(b"\x00\x01")


def test_image_and_audio_from_a_path_take_the_suffixs_type(tmp_path: Path) -> None:
    picture = tmp_path / "chart.jpg"
    picture.write_bytes(b"not really a jpeg")
    assert Image(path=picture).to_content() == ImageContent(b64(b"not really a jpeg"), "image/jpeg")
    sound = tmp_path / "note.mp3"
    sound.write_bytes(b"xx")
    assert Audio(path=str(sound)).to_content() == AudioContent(b64(b"xx"), "audio/mpeg")
    assert Audio(WAV).to_content() == AudioContent(b64(WAV), "audio/wav")
    with pytest.raises(FileNotFoundError):
        Image(path=tmp_path / "missing.png")  # read at once: the tool fails where it is named
    with pytest.raises(TypeError, match="exactly one"):
        Image(PNG, path=picture)
    with pytest.raises(TypeError, match="exactly one"):
        Audio()


def test_file_is_an_embedded_blob_resource(tmp_path: Path) -> None:
    report = tmp_path / "report.csv"
    report.write_bytes(b"a,b\n1,2\n")
    assert File(path=report).to_content() == EmbeddedResource(
        BlobResourceContents(
            uri=report.resolve().as_uri(), blob=b64(b"a,b\n1,2\n"), mime_type="text/csv"
        )
    )
    named = File(b"%PDF-1.7", name="my report.pdf").to_content()
    assert to_wire(named) == {
        "type": "resource",
        "resource": {
            "uri": "file:///my%20report.pdf",
            "mimeType": "application/pdf",
            "blob": b64(b"%PDF-1.7"),
        },
    }
    assert File(b"\x00").to_content().resource == BlobResourceContents(
        uri="file:///file", blob=b64(b"\x00"), mime_type="application/octet-stream"
    )


async def test_a_tool_returns_the_helpers_alone_or_in_a_list() -> None:
    server = Server("media")

    @server.tool
    def picture() -> Image:
        return Image(PNG)

    @server.tool
    def album() -> list[Image | Audio | File | str]:
        return [Image(PNG), "a caption", Audio(WAV), File(b"x", name="x.txt")]

    async with open_client(server) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["picture"].output_schema is None  # content, not structured output
        assert tools["album"].output_schema is None
        one = await client.call_tool("picture")
        assert one.content == [ImageContent(b64(PNG), "image/png")]
        assert one.is_error is False
        several = await client.call_tool("album")
    assert several.content == [
        ImageContent(b64(PNG), "image/png"),
        TextContent("a caption"),
        AudioContent(b64(WAV), "audio/wav"),
        EmbeddedResource(
            BlobResourceContents(uri="file:///x.txt", blob=b64(b"x"), mime_type="text/plain")
        ),
    ]


async def test_a_prompt_returns_the_helpers_as_user_messages() -> None:
    server = Server("media")

    @server.prompt
    def look() -> list[object]:
        return ["What is in this picture?", Image(PNG)]

    async with open_client(server) as client:
        result = await client.get_prompt("look")
    assert [m.content for m in result.messages] == [
        TextContent("What is in this picture?"),
        ImageContent(b64(PNG), "image/png"),
    ]
