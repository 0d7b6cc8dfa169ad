"""The version of trio_mcp, written once: ``pyproject.toml`` reads it from here (trio's way)."""

__version__ = "0.1.0"
