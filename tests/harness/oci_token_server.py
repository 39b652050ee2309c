"""A registry token server on 127.0.0.1 for the ``WWW-Authenticate: Bearer`` flow of a real ``docker-registry``.

The registry (``auth.token`` in its config) answers unauthenticated requests with a Bearer challenge naming this
server as the realm; a client then GETs ``/token?service=...&scope=repository:<name>:pull`` here with HTTP basic
credentials and receives a JWT (ES256, signed with the key of a self-signed certificate sent in the ``x5c`` header,
which the registry trusts through its ``rootcertbundle``), as Quay or Harbor would issue. Wrong or missing
credentials get a 401, like a real token service.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from tests.harness.http_server import LoopbackServer, QuietHandler

SERVICE = "kfp-test-registry"
ISSUER = "kfp-test-token-issuer"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """Issues registry JWTs for ``user``/``password`` (every requested scope is granted to that user).

    Attributes:
        url: ``http://127.0.0.1:<port>/token``, the realm the registry announces.
        issued: How many tokens were issued.
    """

    def __init__(self, certificate: Path, key: Path, user: str, password: str) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        self._certificate = x509.load_pem_x509_certificate(certificate.read_bytes())
        self._key = serialization.load_pem_private_key(key.read_bytes(), password=None)
        self._basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.issued = 0
        server = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.headers.get("Authorization") != server._basic:
                    return self.reply(401, headers={"WWW-Authenticate": 'Basic realm="token"'})
                query = parse_qs(urlparse(self.path).query)
                self.reply(200, {"token": server.token(query.get("scope", [])), "expires_in": 300})

        self._http = LoopbackServer(Handler, "oci-token-server")
        self.url = f"{self._http.url}/token"

    def token(self, scopes: list[str]) -> str:
        """A signed JWT granting ``scopes`` (``repository:<name>:<actions>``, possibly several per value)."""
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        access = []
        for value in scopes:
            for scope in value.split(" "):
                kind, _, rest = scope.partition(":")
                name, _, actions = rest.rpartition(":")
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        der = self._certificate.public_bytes(serialization.Encoding.DER)
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(der).decode()]}
        claims = {
            "iss": ISSUER,
            "sub": "puller",
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        self.issued += 1
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def stop(self) -> None:
        """Stops serving."""
        self._http.stop()
