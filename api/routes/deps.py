"""Shared route dependencies (Annotated aliases)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request
from sqlalchemy.engine import Engine

from api.auth import require_read, require_write
from api.settings import Settings


# Coroutines, so that FastAPI does not hop to its thread pool to read an attribute.
async def get_engine(request: Request) -> Engine:
    return request.app.state.engine


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
Limit = Annotated[int, Query(ge=1, le=500, description="Page size.")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Items to skip.")]
READ = [Depends(require_read)]
WRITE = [Depends(require_write)]
