"""DPoP proofs, thumbprints and client assertions, verified with joserfc as a server would."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from joserfc import jwk, jwt

from trio_mcp.client._jose import DPoPKey, access_token_hash, client_assertion, jwk_thumbprint

NOW = 1_750_000_000.0

#: RFC 7638 §3.1: the example RSA key and its SHA-256 thumbprint.
RFC7638_KEY = {
    "kty": "RSA",
    "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_"
    "BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_"
    "FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4"
    "vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
    "e": "AQAB",
    "alg": "RS256",
    "kid": "2011-04-29",
}
RFC7638_THUMBPRINT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def _unverified_header(token: str) -> dict[str, Any]:
    segment = token.split(".")[0]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    )
    return decoded


def verify_proof(proof: str) -> jwt.Token:
    """What a resource or authorization server does: verify with the key the proof carries."""
    header = _unverified_header(proof)
    return jwt.decode(proof, public_key(header["jwk"]), algorithms=["ES256"])


def public_key(public: dict[str, Any]) -> jwk.ECKey:
    return jwk.ECKey.import_key(public)


def test_the_rfc_7638_example_thumbprint() -> None:
    assert jwk_thumbprint(RFC7638_KEY) == RFC7638_THUMBPRINT
    bare = {name: RFC7638_KEY[name] for name in ("kty", "n", "e")}
    assert jwk_thumbprint(bare) == RFC7638_THUMBPRINT
    with pytest.raises(ValueError, match="lacks n"):
        jwk_thumbprint({"kty": "RSA", "e": "AQAB"})


def test_a_dpop_key_thumbprint_is_the_thumbprint_of_its_public_jwk() -> None:
    key = DPoPKey.generate()
    public = key.public_jwk
    assert set(public) == {"kty", "crv", "x", "y"} and public["crv"] == "P-256"
    assert key.thumbprint() == jwk_thumbprint(public)
    # joserfc computes the same value its own way.
    assert key.thumbprint() == public_key(public).thumbprint()
    assert DPoPKey.generate().thumbprint() != key.thumbprint()


def test_the_rfc_9449_example_ath() -> None:
    # RFC 9449 §7.1: the access token and the ath of the proof that goes with it.
    token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
    assert access_token_hash(token) == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"


def test_a_token_request_proof() -> None:
    key = DPoPKey.generate()
    proof = key.proof("post", "https://as.example/token", now=NOW)
    token = verify_proof(proof)
    assert token.header == {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.public_jwk}
    assert "d" not in token.header["jwk"]
    claims = token.claims
    assert set(claims) == {"jti", "htm", "htu", "iat"}
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://as.example/token"
    assert claims["iat"] == int(NOW)
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16


def test_a_resource_request_proof_carries_ath_and_nonce_and_no_query() -> None:
    key = DPoPKey.generate()
    proof = key.proof(
        "GET",
        "https://rs.example/mcp?session=1#frag",
        now=NOW,
        nonce="server-nonce",
        access_token="the-token",
    )
    claims = verify_proof(proof).claims
    assert claims["htu"] == "https://rs.example/mcp"
    assert claims["nonce"] == "server-nonce"
    assert claims["ath"] == access_token_hash("the-token")
    # The proof's key is the one the token is bound to (cnf.jkt).
    assert jwk_thumbprint(_unverified_header(proof)["jwk"]) == key.thumbprint()


def test_every_proof_is_fresh() -> None:
    key = DPoPKey.generate()
    jtis = {
        verify_proof(key.proof("POST", "https://rs.example/mcp", now=NOW)).claims["jti"]
        for _ in range(20)
    }
    assert len(jtis) == 20


def test_a_proof_signed_by_another_key_does_not_verify() -> None:
    proof = DPoPKey.generate().proof("POST", "https://rs.example/mcp", now=NOW)
    other = public_key(DPoPKey.generate().public_jwk)
    with pytest.raises(Exception, match="signature"):
        jwt.decode(proof, other, algorithms=["ES256"])


def test_a_dpop_key_survives_export_and_import() -> None:
    original = jwk.ECKey.generate_key("P-256", private=True)
    key = DPoPKey.from_private(original.as_pem(private=True).decode())
    assert key.thumbprint() == original.thumbprint()
    assert DPoPKey.from_private(original.as_dict(private=True)).thumbprint() == key.thumbprint()
    with pytest.raises(ValueError, match="private P-256"):
        DPoPKey(jwk.ECKey.import_key(original.as_dict(private=False)))
    with pytest.raises(ValueError, match="private P-256"):
        DPoPKey(jwk.ECKey.generate_key("P-384", private=True))


@pytest.mark.parametrize(
    ("make", "alg"),
    [
        (lambda: jwk.ECKey.generate_key("P-256", private=True), "ES256"),
        (lambda: jwk.ECKey.generate_key("P-384", private=True), "ES384"),
        (lambda: jwk.RSAKey.generate_key(2048, private=True), "RS256"),
        (lambda: jwk.OKPKey.generate_key("Ed25519", private=True), "Ed25519"),
    ],
)
@pytest.mark.parametrize("form", ["pem", "jwk"])
def test_a_client_assertion_by_key_type(make: Any, alg: str, form: str) -> None:
    signer = make()
    key = signer.as_pem(private=True).decode() if form == "pem" else signer.as_dict(private=True)
    assertion = client_assertion("my-client", "https://as.example", key, now=NOW, lifetime=120)
    token = jwt.decode(assertion, signer, algorithms=[alg])
    assert token.header == {"typ": "JWT", "alg": alg}
    claims = token.claims
    assert claims["iss"] == claims["sub"] == "my-client"
    assert claims["aud"] == "https://as.example"
    assert claims["iat"] == int(NOW)
    assert claims["exp"] == int(NOW) + 120
    assert isinstance(claims["jti"], str)
    again = jwt.decode(client_assertion("my-client", "a", key, now=NOW), signer, algorithms=[alg])
    assert again.claims["jti"] != claims["jti"]


def test_a_client_assertion_with_a_named_algorithm() -> None:
    signer = jwk.RSAKey.generate_key(2048, private=True)
    key = signer.as_pem(private=True).decode()
    assertion = client_assertion("c", "https://as.example", key, alg="PS256", now=NOW)
    assert jwt.decode(assertion, signer, algorithms=["PS256"]).header["alg"] == "PS256"


def test_a_client_assertion_needs_a_private_asymmetric_key() -> None:
    public = jwk.ECKey.generate_key("P-256", private=True).as_dict(private=False)
    with pytest.raises(ValueError, match="private"):
        client_assertion("c", "https://as.example", public, now=NOW)
    with pytest.raises(ValueError, match="not 'oct'"):
        client_assertion("c", "https://as.example", {"kty": "oct", "k": "c2VjcmV0"}, now=NOW)
