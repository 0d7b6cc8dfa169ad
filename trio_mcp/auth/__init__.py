"""The resource server: the token verifiers and the HTTP gate that admits or challenges a request.

The policy a server applies (``Auth``, ``Principal``, the scopes each tool needs) belongs to the
server (:mod:`trio_mcp.server`); this room holds what checks a token: fixed tokens, JWTs against
an authorization server's key set, and RFC 7662 introspection, with their bounded calls to the
authorization server. Importing it loads joserfc only when a JWT verifier is made.
"""

from ._introspection import IntrospectionVerifier
from ._jwt import JWTVerifier
from ._static import StaticTokenVerifier

__all__ = ["IntrospectionVerifier", "JWTVerifier", "StaticTokenVerifier"]
