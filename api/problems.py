"""RFC 9457 problem details for every error the service returns."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from planner.errors import PlannerInputError

MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("planner.api")


class FieldError(BaseModel):
    pointer: str = Field(description="JSON Pointer into the request body, e.g. #/plan/tp.")
    field: str = Field(description="The same path, dotted: plan.tp.")
    detail: str


class Problem(BaseModel):
    """An error, as application/problem+json (RFC 9457)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field("about:blank", description="URI reference naming the problem type.")
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] | None = None


class ApiProblem(Exception):
    def __init__(self, status: int, title: str, detail: str | None = None,
                 type_: str = "about:blank", headers: dict | None = None, **extra) -> None:
        super().__init__(detail or title)
        self.status, self.title, self.detail, self.type = status, title, detail, type_
        self.headers, self.extra = headers, extra


def problem(status: int, title: str, detail: str | None = None, *, type_: str = "about:blank",
            instance: str | None = None, headers: dict | None = None, **extra) -> JSONResponse:
    body = {"type": type_, "title": title, "status": status}
    if detail is not None:
        body["detail"] = detail
    if instance is not None:
        body["instance"] = instance
    body.update(extra)
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def not_found(kind: str, ident: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"no {kind} with id {ident!r}", type_="/problems/not-found")


def _pointer(loc: tuple) -> tuple[str, str]:
    parts = [str(p) for p in loc if p != "body" and not str(p).startswith(("function-", "~"))]
    return "#/" + "/".join(parts), ".".join(parts) or "(body)"


def field_problem(field: str, reason: str, instance: str) -> JSONResponse:
    pointer = "#/" + field.replace(".", "/") if field not in ("(body)", "") else "#"
    return problem(422, "Invalid request", f"{field}: {reason}", type_="/problems/invalid-request",
                   instance=instance, errors=[{"pointer": pointer, "field": field,
                                               "detail": reason}])


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        errors = []
        for err in exc.errors():
            if err.get("type") == "json_invalid":
                return problem(400, "Malformed JSON",
                               f"the body is not valid JSON: {err.get('msg', '')}",
                               type_="/problems/malformed-json", instance=request.url.path)
            pointer, field = _pointer(tuple(err.get("loc", ())))
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            errors.append({"pointer": pointer, "field": field, "detail": msg})
        if not errors:
            errors.append({"pointer": "#", "field": "(body)", "detail": "invalid request"})
        first = errors[0]
        return problem(422, "Invalid request", f"{first['field']}: {first['detail']}",
                       type_="/problems/invalid-request", instance=request.url.path,
                       errors=errors)

    @app.exception_handler(PlannerInputError)
    async def _planner_input(request: Request, exc: PlannerInputError):
        return field_problem(exc.field, exc.reason, request.url.path)

    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem):
        return problem(exc.status, exc.title, exc.detail, type_=exc.type,
                       instance=request.url.path, headers=exc.headers, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        from http import HTTPStatus

        try:
            title = HTTPStatus(exc.status_code).phrase
        except ValueError:
            title = "Error"
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            # Starlette answers from the first route whose path matched; the path's methods
            # are those of every route it matches (RFC 9110 section 15.5.6).
            allowed = allowed_methods(request)
            headers = {**(headers or {}), "Allow": ", ".join(allowed)}
            detail = f"{request.method} is not allowed here; allowed: {', '.join(allowed)}"
        return problem(exc.status_code, title, detail, instance=request.url.path,
                       headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "Internal Server Error", "an unexpected error occurred; it was "
                       "logged", instance=request.url.path)


def allowed_methods(request: Request) -> list[str]:
    """The methods some route serves on this request's path (each tried against the routes
    as Starlette matches them)."""
    from starlette.routing import Match

    out = []
    for method in ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"):
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
            out.append(method)
    return out


PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "content": {MEDIA_TYPE: {}}, "description": "Malformed JSON."},
    401: {"model": Problem, "content": {MEDIA_TYPE: {}}, "description": "Missing or wrong token."},
    404: {"model": Problem, "content": {MEDIA_TYPE: {}}, "description": "Unknown id."},
    413: {"model": Problem, "content": {MEDIA_TYPE: {}}, "description": "Body too large."},
    422: {"model": Problem, "content": {MEDIA_TYPE: {}},
          "description": "Invalid request: the field and the reason. A referenced id that "
                         "is not stored (a cluster, a plan of a validation) is answered here "
                         "too, naming the field (e.g. cluster.id)."},
    503: {"model": Problem, "content": {MEDIA_TYPE: {}},
          "description": "The database or the job queue is unavailable; retry later."},
}
