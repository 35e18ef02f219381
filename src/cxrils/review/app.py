"""The FastAPI application of ``cxrils review``: the review page and its JSON API.

Endpoints
---------
``GET /``                                  the page (``static/index.html``)
``GET /stats``                             the statistics page (:func:`cxrils.review.report.stats_html`)
``GET /api/info``                          dataset, plan, sample size, reasons, reviewers
``GET /api/next?reviewer=R[&after=P][&skipped=1]``
                                           the reviewer's next record (or null) and progress
``GET /api/records/{position}[?reviewer=R]``   one sampled record with its chain
``GET /api/records/{position}/image.png``  its 8-bit image; ``.../mask.png`` its mask (RGBA)
``POST /api/decisions``                    JSON ``reviewer``, ``position``, ``record_id``, ``decision``
                                           (accept | reject | skip), ``reason`` (rejections),
                                           ``request_id``, ``revisit`` -> the saved id, progress and the
                                           next record (the first undecided; with ``revisit`` the next skipped)
``POST /api/undo``                         JSON ``reviewer`` -> the record whose decision was withdrawn
``GET /api/stats``                         the statistics as JSON
``POST /api/export``                       writes the accepted records (``export_dir``)

Security: every error is JSON ``{"detail": "<plain words>"}``. Without a token the
app answers only requests addressed to a loopback name (``Host`` of 127.0.0.1,
localhost or ::1: another site cannot reach it through DNS rebinding); with a token
(``cxrils review --host``) every request must carry it (``Authorization: Bearer``, or
the cookie the page gets from ``/?token=...``). A ``POST`` must be JSON of at most
:data:`MAX_BODY_BYTES` from the page's own origin (a form another site submits is
refused). Records are addressed by their position in the sample and checked against
their id; files are served only from ``DATASET/images`` and never by a name a client sends.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
from pathlib import Path
from typing import Literal

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from cxrils.dataset import DatasetError
from cxrils.review.export import export_accepted
from cxrils.review.report import stats_html
from cxrils.review.session import ReviewSession
from cxrils.review.stats import review_stats
from cxrils.review.store import REJECT_REASONS, REVIEWER_PATTERN, RequestConflict, ReviewError

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).with_name("static")
#: Largest request body accepted (ours: a decision is well under 1 KB).
MAX_BODY_BYTES = 16 * 1024
#: Host names the app answers without a token.
LOOPBACK_HOSTS: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1"})
#: Cookie that carries the token once the page was opened with ``/?token=...``.
TOKEN_COOKIE = "cxrils_review_token"
#: How long a browser may keep a record's image and mask (they never change under a sample).
IMAGE_CACHE = "private, max-age=3600"


class DecisionIn(BaseModel):
    """Body of ``POST /api/decisions``."""

    model_config = ConfigDict(extra="forbid")
    reviewer: str = Field(pattern=REVIEWER_PATTERN)
    position: int = Field(ge=0)
    record_id: str = Field(min_length=1, max_length=256)
    decision: Literal["accept", "reject", "skip"]
    reason: Literal[tuple(REJECT_REASONS)] | None = None  # type: ignore[valid-type]
    request_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{8,64}$")
    revisit: bool = False  # the page is going through skipped records: answer the next skipped one


class ReviewerIn(BaseModel):
    """Body of ``POST /api/undo``."""

    model_config = ConfigDict(extra="forbid")
    reviewer: str = Field(pattern=REVIEWER_PATTERN)


def _validation_message(errors: list[dict]) -> str:
    words = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ())[1:]) or "body"
        words.append(f"'{where}' is not valid: {err.get('msg', 'bad value')}")
    return "the request is not valid: " + "; ".join(dict.fromkeys(words))


def _host_name(header: str) -> str:
    """The host name of a ``Host`` header value, without the port ("[::1]:8765" -> "::1")."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def _same_token(given: str, token: str) -> bool:
    """Constant-time comparison of a token a client sent with the server's. Bytes, not
    str: ``secrets.compare_digest`` raises on a non-ASCII str, and header values arrive
    as whatever a client sends."""
    return secrets.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8", "replace"))


def _json(value):
    """NaN -> None, recursively (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


def create_review_app(
    session: ReviewSession, *, token: str | None = None, export_dir: str | Path | None = None
) -> FastAPI:
    """Build the review app around an open review.

    Parameters
    ----------
    session : ReviewSession
        :func:`cxrils.review.session.open_review`'s result.
    token : str, optional
        When given, every request must carry it (see the module docstring); without
        it, only loopback ``Host`` names are answered.
    export_dir : path, optional
        Where ``POST /api/export`` writes (default: ``{DATASET}-accepted`` beside the dataset).
    """
    out_dir = Path(export_dir) if export_dir is not None else session.root.with_name(f"{session.root.name}-accepted")
    export_lock = threading.Lock()
    app = FastAPI(title="cxrils review", description="Expert review of a generated cxrils dataset.")

    @app.middleware("http")
    async def guard(request: Request, call_next):
        host = request.headers.get("host", "")
        if token is None and _host_name(host) not in LOOPBACK_HOSTS:
            return JSONResponse(
                {
                    "detail": f"this review server answers only on 127.0.0.1 or localhost (asked for "
                    f"{host!r}); start it with --host and a token to reach it otherwise"
                },
                status_code=421,
            )
        if token is not None:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip() or request.cookies.get(
                TOKEN_COOKIE, ""
            )
            if request.method == "GET" and request.url.path == "/" and "token" in request.query_params:
                if _same_token(request.query_params["token"], token):
                    resp = RedirectResponse("/", status_code=303)
                    resp.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
                    return resp
            if not _same_token(given, token):
                return JSONResponse(
                    {
                        "detail": "this review server needs its token: open the address "
                        "`cxrils review` printed (it ends in ?token=...)"
                    },
                    status_code=401,
                )
        if request.method == "POST":
            if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
                return JSONResponse({"detail": "send JSON (Content-Type: application/json)"}, status_code=415)
            length = request.headers.get("content-length", "")
            if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                return JSONResponse(
                    {"detail": f"the request body must state its length and be at most {MAX_BODY_BYTES} bytes"},
                    status_code=413,
                )
            origin = request.headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1] != host:
                return JSONResponse({"detail": f"requests from {origin} are not accepted"}, status_code=403)
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def plain_validation_error(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": _validation_message(list(exc.errors()))}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else "the request failed"
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"there is nothing at {request.url.path}; the review page is at /"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed at {request.url.path}"
        return JSONResponse({"detail": detail}, status_code=exc.status_code)

    @app.exception_handler(ReviewError)
    async def review_error(request: Request, exc: ReviewError):
        return JSONResponse({"detail": str(exc)}, status_code=409 if isinstance(exc, RequestConflict) else 400)

    @app.exception_handler(DatasetError)
    async def dataset_error(request: Request, exc: DatasetError):
        return JSONResponse({"detail": f"the dataset could not be read: {exc}"}, status_code=500)

    def record_or_404(position: int, reviewer: str | None = None) -> dict:
        if not 0 <= position < len(session):
            raise HTTPException(404, f"there is no record {position} in this review (0-{len(session) - 1})")
        return session.payload(position, reviewer)

    def next_record(reviewer: str, after: int = -1, skipped: bool = False) -> dict:
        """The reviewer's next record, and the one after it (the page preloads its images)."""
        pos = session.store.next_position(reviewer, after=after, skipped=skipped)
        upcoming = session.store.next_position(reviewer, after=pos, skipped=skipped) if pos is not None else None
        return {
            "progress": session.progress(reviewer),
            "upcoming": upcoming,
            "record": session.payload(pos, reviewer) if pos is not None else None,
        }

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    @app.get("/stats", include_in_schema=False)
    def stats_page() -> HTMLResponse:
        return HTMLResponse(stats_html(review_stats(session.store), session.root.name))

    @app.get("/api/info")
    def info() -> dict:
        return session.info()

    @app.get("/api/next")
    def next_(
        reviewer: str = Query(pattern=REVIEWER_PATTERN), after: int = Query(-1, ge=-1), skipped: bool = False
    ) -> dict:
        if after >= len(session):  # null would read as "done"
            raise HTTPException(404, f"there is no record {after} in this review (0-{len(session) - 1})")
        return next_record(reviewer, after, skipped)

    @app.get("/api/records/{position}")
    def record(position: int, reviewer: str | None = Query(None, pattern=REVIEWER_PATTERN)) -> dict:
        return record_or_404(position, reviewer)

    @app.get("/api/records/{position}/image.png")
    def image(position: int) -> FileResponse:
        record_or_404(position)
        return FileResponse(
            session.image_path(position), media_type="image/png", headers={"Cache-Control": IMAGE_CACHE}
        )

    @app.get("/api/records/{position}/mask.png")
    def mask(position: int) -> Response:
        record_or_404(position)
        return Response(session.mask_png(position), media_type="image/png", headers={"Cache-Control": IMAGE_CACHE})

    @app.post("/api/decisions")
    def decide(body: DecisionIn) -> dict:
        rec = record_or_404(body.position)
        if rec["record_id"] != body.record_id:
            raise HTTPException(
                409, f"record {body.position} is {rec['record_id']!r}, not {body.record_id!r}: reload the page"
            )
        row = session.store.decide(body.reviewer, body.record_id, body.decision, body.reason, body.request_id)
        log.info(
            "review: %s %s %s%s",
            body.reviewer,
            body.record_id,
            body.decision,
            f" ({body.reason})" if body.reason else "",
        )
        if body.revisit:
            return {"id": row, **next_record(body.reviewer, body.position, skipped=True)}
        return {"id": row, **next_record(body.reviewer)}

    @app.post("/api/undo")
    def undo(body: ReviewerIn) -> dict:
        record_id = session.store.undo(body.reviewer)
        payload = session.payload(session.position_of(record_id), body.reviewer) if record_id else None
        return {"undone": record_id, "record": payload, "progress": session.progress(body.reviewer)}

    @app.get("/api/stats")
    def stats() -> dict:
        s = review_stats(session.store)
        return _json(
            {
                "counts": s.counts,
                "rates": {"+".join(by) or "all": t.to_dict("records") for by, t in s.rates.items()},
                "reviewers": s.reviewer_rates.to_dict("records"),
                "agreement": s.agreement.to_dict("records"),
                "reasons": s.reasons.to_dict("records"),
                "dataset_estimate": s.dataset_estimate.to_dict("records"),
                "paper": s.paper.to_dict("records"),
            }
        )

    @app.post("/api/export")
    def export() -> dict:
        if not export_lock.acquire(blocking=False):
            raise HTTPException(409, "an export is already running")
        try:
            return export_accepted(session.root, session.store, out_dir)
        except OSError as err:
            raise HTTPException(500, f"the export to {out_dir} failed: {err}") from None
        finally:
            export_lock.release()

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
