"""Tool and parameter descriptions from Google, numpy and reST docstrings."""

from __future__ import annotations

from trio_mcp.server._schema import parse_docstring

# --- docstrings --------------------------------------------------------------------------------


def test_parse_google_docstring() -> None:
    doc = """Summary line.

    Details here.

    Args:
        x (int): the x value,
            continued.
        y: the y value

    Returns:
        something
    """
    assert parse_docstring(doc) == (
        "Summary line.\n\nDetails here.",
        {"x": "the x value, continued.", "y": "the y value"},
    )


def test_parse_rest_docstring() -> None:
    doc = """Summary.

    :param x: the x value
        continued
    :param int y: the y value
    :returns: nothing
    """
    assert parse_docstring(doc) == ("Summary.", {"x": "the x value continued", "y": "the y value"})


def test_parse_numpy_docstring() -> None:
    doc = """Summary.

    Parameters
    ----------
    x : int
        the x value
    y
        the y value
        more

    Returns
    -------
    int
        not a parameter
    """
    assert parse_docstring(doc) == ("Summary.", {"x": "the x value", "y": "the y value more"})


def test_parse_docstring_edge_cases() -> None:
    assert parse_docstring(None) == (None, {})
    assert parse_docstring("") == (None, {})
    assert parse_docstring("\n    Args:\n        a: only args\n    ") == (None, {"a": "only args"})
