"""Tool schemas: derived from Python signatures and checked by the compiled checker, or written by
hand and checked by the ``jsonschema`` library (``_handwritten``, imported only when used)."""

from ...protocol._jsonschema import ArgumentsError, validate
from ._builder import schema_for_type, to_json
from ._docstrings import parse_docstring
from ._elicitation import elicitation_schema
from ._signature import FunctionSignature, ResultError, explicit_signature, function_signature

__all__ = [
    "ArgumentsError",
    "FunctionSignature",
    "ResultError",
    "elicitation_schema",
    "explicit_signature",
    "function_signature",
    "parse_docstring",
    "schema_for_type",
    "to_json",
    "validate",
]
