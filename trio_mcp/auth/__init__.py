"""The resource server: the verifiers (static, JWT with JWKS, introspection), their calls to an
authorization server, and the HTTP gate that admits or challenges a request."""
