"""The JWTs an OAuth client signs: DPoP proofs (RFC 9449) and client assertions (RFC 7523).

Built on joserfc, which does the JOSE work (keys, JWS, JWT) and no I/O. No clock is read here:
every function that puts a time in a token takes ``now`` (``time.time()`` seconds).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from joserfc import jwk, jwt

#: The members of a public key that its RFC 7638 thumbprint covers, by key type.
_THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
    "oct": ("k", "kty"),
}
#: The JWS algorithm a key signs with when none is named: by key type (and curve).
_DEFAULT_ALGS = {"RSA": "RS256", "P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwk_thumbprint(key: dict[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a JWK, base64url: the digest of its required members
    only, in lexical order, with no whitespace (other members, ``kid`` or ``alg``, change
    nothing)."""
    members = _THUMBPRINT_MEMBERS.get(key.get("kty", ""))
    if members is None:
        raise ValueError(f"no thumbprint for key type {key.get('kty')!r}")
    missing = [m for m in members if not isinstance(key.get(m), str)]
    if missing:
        raise ValueError(f"the JWK lacks {', '.join(missing)}")
    canonical = json.dumps({m: key[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def access_token_hash(access_token: str) -> str:
    """The ``ath`` of a DPoP proof: base64url of the SHA-256 of the token (RFC 9449 §4.2)."""
    return _b64url(hashlib.sha256(access_token.encode("ascii")).digest())


def _htu(url: str) -> str:
    """The ``htu`` of a request URL: without its query and fragment (RFC 9449 §4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class DPoPKey:
    """The key pair a client proves possession of with DPoP (RFC 9449): ES256 on P-256.

    A token the authorization server binds to it (``cnf.jkt`` = :meth:`thumbprint`) is useless
    without it. Keep one per client for as long as its tokens live.
    """

    def __init__(self, key: jwk.ECKey) -> None:
        if key.curve_name != "P-256" or not key.is_private:
            raise ValueError("a DPoP key is a private P-256 key")
        self._key = key

    @classmethod
    def generate(cls) -> DPoPKey:
        """A new random key."""
        return cls(jwk.ECKey.generate_key("P-256", private=True))

    @classmethod
    def from_private(cls, key: str | dict[str, Any]) -> DPoPKey:
        """A key from its private PEM or JWK (to keep one across restarts)."""
        return cls(jwk.ECKey.import_key(key))

    @property
    def public_jwk(self) -> dict[str, str]:
        """The public key as a JWK (``kty``, ``crv``, ``x``, ``y``): what every proof carries."""
        public = self._key.as_dict(private=False)
        return {name: str(public[name]) for name in ("kty", "crv", "x", "y")}

    def thumbprint(self) -> str:
        """The RFC 7638 thumbprint of :attr:`public_jwk`: the ``jkt`` a bound token names."""
        return jwk_thumbprint(self.public_jwk)

    def proof(
        self,
        method: str,
        url: str,
        *,
        now: float,
        nonce: str | None = None,
        access_token: str | None = None,
    ) -> str:
        """A fresh DPoP proof for one HTTP request (RFC 9449 §4.2): a new ``jti`` each time;
        ``nonce`` is the server's latest ``DPoP-Nonce``; ``access_token`` (for a resource
        request) adds its hash as ``ath``."""
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.public_jwk}
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": _htu(url),
            "iat": int(now),
        }
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        return jwt.encode(header, claims, self._key, algorithms=["ES256"])

    def __repr__(self) -> str:
        return f"DPoPKey(thumbprint={self.thumbprint()!r})"


def _pem_key_type(pem: str) -> Literal["RSA", "EC", "OKP"]:
    loaded = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
    if isinstance(loaded, rsa.RSAPrivateKey):
        return "RSA"
    if isinstance(loaded, ec.EllipticCurvePrivateKey):
        return "EC"
    if isinstance(loaded, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return "OKP"
    raise ValueError("a client assertion is signed with an RSA, EC or Ed25519/Ed448 key")


def _signing_key(key: str | dict[str, Any]) -> jwk.RSAKey | jwk.ECKey | jwk.OKPKey:
    if isinstance(key, dict):
        kty = key.get("kty")
        if kty not in ("RSA", "EC", "OKP"):
            raise ValueError(
                f"a client assertion is signed with an RSA, EC or OKP key, not {kty!r}"
            )
        imported: jwk.Key = jwk.import_key(key, kty)
    else:
        imported = jwk.import_key(key, _pem_key_type(key))
    if isinstance(imported, jwk.OctKey) or not imported.is_private:
        raise ValueError("a client assertion needs a private asymmetric key")
    return imported


def client_assertion(
    client_id: str,
    audience: str,
    key: str | dict[str, Any],
    *,
    alg: str | None = None,
    now: float,
    lifetime: float = 300,
) -> str:
    """A ``private_key_jwt`` client assertion (RFC 7523 §2.2, 3): ``iss`` and ``sub`` are the
    client id, ``aud`` the authorization server (its issuer), a fresh ``jti``, valid for
    ``lifetime`` seconds from ``now``.

    ``key`` is a private key as PEM or JWK; ``alg`` defaults by key type: RS256 for RSA, ES256 /
    ES384 / ES512 by curve for EC, Ed25519 / Ed448 (RFC 9864) for OKP.
    """
    signer = _signing_key(key)
    if alg is None:
        if isinstance(signer, jwk.OKPKey):
            alg = signer.curve_name  # "Ed25519" or "Ed448" (RFC 9864)
        else:
            curve = signer.curve_name if isinstance(signer, jwk.ECKey) else "RSA"
            alg = _DEFAULT_ALGS.get(curve)
            if alg is None:
                raise ValueError(f"no default signing algorithm for curve {curve}: name one")
    header = {"typ": "JWT", "alg": alg}
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": int(now),
        "exp": int(now + lifetime),
        "jti": secrets.token_urlsafe(16),
    }
    return jwt.encode(header, claims, signer, algorithms=[alg])
