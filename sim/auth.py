"""Bearer tokens to users, as a static token file does for a real API server."""

from sim.api import ADMIN, User
from sim.status import unauthorized


class Authenticator:
    """`tokens` maps a bearer token to its user; without a map every request is the cluster admin."""

    def __init__(self, tokens: dict[str, User] | None = None):
        self.tokens = tokens

    def user(self, authorization: str | None) -> User:
        """The user behind an `Authorization` header; an unknown or missing token is a 401."""
        if self.tokens is None:
            return ADMIN
        scheme, _, token = (authorization or "").partition(" ")
        user = self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise unauthorized()
        return user
