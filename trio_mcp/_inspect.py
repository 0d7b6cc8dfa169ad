"""``trio-mcp inspect TARGET``: what a server is and offers, as text or as JSON.

One connection, then every list the server's capabilities announce (each walked to its last
page); a list the server does not offer is reported empty and never asked for.
"""

from __future__ import annotations

from typing import Any

from .client import Client
from .protocol._types import to_wire

#: The capability each listing needs, and its key in the JSON report.
_LISTINGS = (
    ("tools", "tools"),
    ("prompts", "prompts"),
    ("resources", "resources"),
    ("resourceTemplates", "resources"),
)


async def report(client: Client) -> dict[str, Any]:
    """The server's info, protocol, capabilities and every list, as JSON-ready data."""
    capabilities = client.server_capabilities
    data: dict[str, Any] = {
        "serverInfo": to_wire(client.server_info),
        "protocolVersion": client.protocol_version,
        "era": "modern" if client.modern else "handshake",
        "instructions": client.instructions,
        "capabilities": to_wire(capabilities),
    }
    for key, capability in _LISTINGS:
        if getattr(capabilities, capability) is None:
            data[key] = []
            continue
        if key == "tools":
            items: list[Any] = await client.list_tools()
        elif key == "prompts":
            items = await client.list_prompts()
        elif key == "resources":
            items = await client.list_resources()
        else:
            items = await client.list_resource_templates()
        data[key] = [to_wire(item) for item in items]
    return data


def _first_line(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""


def _type_of(schema: Any) -> str:
    """A property's schema in a few words: ``integer``, ``string | null``, ``array of string``."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    kinds = schema.get("type")
    if kinds is None:
        options = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(options, list):
            return " | ".join(_type_of(option) for option in options)
        return "object" if "properties" in schema else "any"
    if isinstance(kinds, list):
        return " | ".join(str(kind) for kind in kinds)
    if kinds == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type_of(schema['items'])}"
    return str(kinds)


def _capability_words(capabilities: dict[str, Any]) -> list[str]:
    words = []
    for name, value in capabilities.items():
        flags = [key for key, on in value.items() if on is True] if isinstance(value, dict) else []
        words.append(f"{name} ({', '.join(flags)})" if flags else name)
    return words


def _section(lines: list[str], title: str, items: list[Any]) -> None:
    lines.append("")
    lines.append(f"{title} ({len(items)})" if items else f"{title}: none")


def as_text(data: dict[str, Any]) -> str:
    """The report for a person to read."""
    info = data["serverInfo"]
    title = f" ({info['title']})" if info.get("title") else ""
    lines = [
        f"server: {info.get('name', '?')} {info.get('version', '')}".rstrip() + title,
        f"protocol: {data['protocolVersion']} ({data['era']} era)",
    ]
    capabilities = _capability_words(data["capabilities"])
    lines.append(f"capabilities: {', '.join(capabilities) if capabilities else 'none'}")
    if data.get("instructions"):
        lines.append(f"instructions: {_first_line(data['instructions'])}")

    _section(lines, "tools", data["tools"])
    for tool in data["tools"]:
        schema = tool.get("inputSchema") or {}
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        head = f"  {tool['name']}({', '.join(properties)})"
        description = _first_line(tool.get("description"))
        lines.append(f"{head}  {description}" if description else head)
        for name, prop in properties.items():
            need = "required" if name in required else "optional"
            if isinstance(prop, dict) and "default" in prop:
                need += f" (default {prop['default']!r})"
            about = _first_line(prop.get("description")) if isinstance(prop, dict) else ""
            line = f"      {name}: {_type_of(prop)}, {need}"
            lines.append(f"{line}  {about}" if about else line)

    _section(lines, "prompts", data["prompts"])
    for prompt in data["prompts"]:
        arguments = ", ".join(
            a["name"] if a.get("required") else f"[{a['name']}]"
            for a in prompt.get("arguments") or []
        )
        head = f"  {prompt['name']}({arguments})"
        description = _first_line(prompt.get("description"))
        lines.append(f"{head}  {description}" if description else head)

    _section(lines, "resources", data["resources"])
    for resource in data["resources"]:
        about = _first_line(resource.get("description") or resource.get("name"))
        mime = f" [{resource['mimeType']}]" if resource.get("mimeType") else ""
        lines.append(f"  {resource['uri']}{mime}  {about}".rstrip())

    _section(lines, "resource templates", data["resourceTemplates"])
    for template in data["resourceTemplates"]:
        about = _first_line(template.get("description") or template.get("name"))
        lines.append(f"  {template['uriTemplate']}  {about}".rstrip())
    return "\n".join(lines) + "\n"
