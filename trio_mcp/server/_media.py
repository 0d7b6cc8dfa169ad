"""``Image``, ``Audio`` and ``File``: binary content a tool returns, from bytes or a file.

A tool that returns a picture should not have to base64-encode it and name its MIME type by
hand. These helpers take the bytes (or read a file, at once, so a missing file fails the tool
where it is named) and become the content block MCP has for them: an image, audio, or an
embedded resource holding a blob. The MIME type is the one given, else the file's suffix's,
else (images and audio) what the first bytes say.
"""

from __future__ import annotations

import base64
import mimetypes
import os
from pathlib import Path
from urllib.parse import quote

import attrs

from ..protocol._types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
)

__all__ = ["Audio", "File", "Image"]

#: Types ``mimetypes`` may not know on every platform, by suffix.
_SUFFIXES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
    ".m4a": "audio/mp4",
    ".webm": "audio/webm",
}


def _sniff(data: bytes) -> str | None:
    """The MIME type the first bytes of common image and audio formats announce."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if data.startswith(b"ID3") or data[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if data.startswith(b"OggS"):
        return "audio/ogg"
    if data.startswith(b"fLaC"):
        return "audio/flac"
    return None


def _by_suffix(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return _SUFFIXES.get(suffix) or mimetypes.guess_type(path.name)[0]


def _load(
    kind: str, data: bytes | None, path: str | os.PathLike[str] | None
) -> tuple[bytes, Path | None]:
    if (data is None) == (path is None):
        raise TypeError(f"{kind}() takes its content as data= (bytes) or path=, exactly one")
    if data is not None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"{kind}(data=...) must be bytes, not {type(data).__name__}")
        return bytes(data), None
    assert path is not None
    where = Path(path).expanduser()
    return where.read_bytes(), where


def _media_type(kind: str, given: str | None, where: Path | None, data: bytes) -> str:
    found = given or (_by_suffix(where) if where is not None else None) or _sniff(data)
    if found is None:
        what = f"the suffix of {str(where)!r}" if where is not None else "its first bytes"
        raise ValueError(f"{kind}: cannot tell the MIME type from {what}: give mime_type=")
    return found


@attrs.frozen(init=False)
class _Media:
    """What :class:`Image` and :class:`Audio` share: the bytes, given or read from ``path``
    at once (a missing file fails the tool here), and a MIME type, ``mime_type``, else the file's
    suffix's, else what the bytes start with; ``ValueError`` when none says."""

    data: bytes
    mime_type: str
    annotations: Annotations | None

    def __init__(
        self,
        data: bytes | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        mime_type: str | None = None,
        annotations: Annotations | None = None,
    ) -> None:
        kind = type(self).__name__
        content, where = _load(kind, data, path)
        found = _media_type(kind, mime_type, where, content)
        self.__attrs_init__(content, found, annotations)

    def _base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@attrs.frozen(init=False)
class Image(_Media):
    """An image a tool returns: ``Image(png_bytes)``, ``Image(path="chart.png")``.

    Becomes an image content block (base64 on the wire). The MIME type is ``mime_type``, else
    the file's suffix's, else what the bytes start with (PNG, JPEG, GIF, WebP); ``ValueError``
    when none says. ``path`` is read at once: a missing file fails the tool here.
    """

    def to_content(self) -> ImageContent:
        """The content block: an ``ImageContent``."""
        return ImageContent(self._base64(), self.mime_type, annotations=self.annotations)


@attrs.frozen(init=False)
class Audio(_Media):
    """Audio a tool returns: ``Audio(wav_bytes)``, ``Audio(path="note.mp3")``.

    Becomes an audio content block. The MIME type is ``mime_type``, else the file's
    suffix's, else what the bytes start with (WAV, MP3, Ogg, FLAC).
    """

    def to_content(self) -> AudioContent:
        """The content block: an ``AudioContent``."""
        return AudioContent(self._base64(), self.mime_type, annotations=self.annotations)


@attrs.frozen(init=False)
class File:
    """Any file a tool returns: ``File(path="report.pdf")``, ``File(data, name="a.csv")``.

    Becomes an embedded resource holding the bytes as a blob, at ``file:///NAME`` (a file's
    own ``file://`` URI when read from a path; ``name`` defaults to the file's name, else
    ``file``). The MIME type is ``mime_type``, else the suffix's (of ``name`` or the path),
    else ``application/octet-stream``.
    """

    data: bytes
    mime_type: str
    uri: str
    annotations: Annotations | None

    def __init__(
        self,
        data: bytes | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        name: str | None = None,
        mime_type: str | None = None,
        annotations: Annotations | None = None,
    ) -> None:
        content, where = _load("File", data, path)
        named = Path(name) if name else where
        found = mime_type or (_by_suffix(named) if named is not None else None)
        if where is not None and not name:
            uri = where.resolve().as_uri()
        else:
            uri = "file:///" + quote(name or "file")
        self.__attrs_init__(content, found or "application/octet-stream", uri, annotations)

    def to_content(self) -> EmbeddedResource:
        """The content block: an ``EmbeddedResource`` with a ``BlobResourceContents``."""
        blob = base64.b64encode(self.data).decode("ascii")
        contents = BlobResourceContents(uri=self.uri, blob=blob, mime_type=self.mime_type)
        return EmbeddedResource(contents, annotations=self.annotations)


#: The helpers, for ``isinstance``.
MEDIA_TYPES: tuple[type[Image], type[Audio], type[File]] = (Image, Audio, File)
