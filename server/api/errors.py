"""Exception handlers: how errors raised below the routes become HTTP responses.

Routes do not catch the store's `NotFound`: it becomes a 404 here, with the same body an
`HTTPException(404, message)` has (`{"detail": message}`).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, OperationalError

from server.background import outage
from server.store import NotFound

log = logging.getLogger("scalewatch")


async def not_found(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=404)


async def invalid_request(_request: Request, exc: Exception) -> JSONResponse:
    # Only location, message and type: echoing the input back would fail on NaN and could
    # reflect megabytes of payload.
    assert isinstance(exc, RequestValidationError)
    detail = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
        for e in exc.errors()
    ]
    return JSONResponse({"detail": detail}, status_code=422)


async def bad_value(_request: Request, exc: Exception) -> JSONResponse:
    # The database refused a value the validators let through (e.g. out of range for its
    # column type). The transaction is rolled back, so nothing was stored.
    assert isinstance(exc, DataError)
    log.info("database rejected a value: %s", exc)
    return JSONResponse(
        {"detail": f"a value was rejected by the database: {str(exc.orig).splitlines()[0]}"},
        status_code=422,
    )


async def database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    outage.failed(exc)  # logged once per outage, not once per request
    return JSONResponse({"detail": "database unavailable, retry later"}, status_code=503)


async def nested_too_deeply(_request: Request, _exc: Exception) -> JSONResponse:
    # json.loads recurses per nesting level: 100k "[" would otherwise be a 500.
    return JSONResponse({"detail": "body is not valid JSON: nested too deeply"}, status_code=400)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RecursionError, nested_too_deeply)
    app.add_exception_handler(NotFound, not_found)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(DataError, bad_value)
    app.add_exception_handler(OperationalError, database_unavailable)
