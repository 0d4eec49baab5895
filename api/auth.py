"""Bearer-token protection of writes (and of reads when configured)."""

from __future__ import annotations

import hmac

from fastapi import Request

from api.problems import ApiProblem
from api.settings import Settings


def check_token(request: Request, *, write: bool) -> None:
    settings: Settings = request.app.state.settings
    token = settings.api_token
    if token is None or (not write and not settings.protect_reads):
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(),
                                                             token.get_secret_value()):
        raise ApiProblem(401, "Unauthorized", "this endpoint needs 'Authorization: Bearer "
                         "<token>' with the service's PLANNER_API_TOKEN",
                         type_="/problems/unauthorized",
                         headers={"WWW-Authenticate": 'Bearer realm="planner"'})


async def require_write(request: Request) -> None:
    check_token(request, write=True)


async def require_read(request: Request) -> None:
    check_token(request, write=False)
