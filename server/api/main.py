"""ASGI entry point for `uvicorn --factory server.api.main:build_app` (used by --workers N).

Settings come from SCALEWATCH_* environment variables, which `scalewatch serve` sets from its
flags before handing over to uvicorn.
"""

from __future__ import annotations

from fastapi import FastAPI

from server.api.app import create_app
from server.config import load_settings


def build_app() -> FastAPI:
    return create_app(load_settings())
