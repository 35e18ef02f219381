"""The FastAPI application of ``cxrils serve``.

Endpoints
---------
``POST /v1/segment``
    multipart form: ``image`` (PNG, JPEG or DICOM file) and ``instruction`` (text) ->
    JSON: ``instruction`` (as sent), ``instruction_answered`` (as the model read it,
    :meth:`~cxrils.models.base.Segmenter.read_instruction`), ``answer``,
    ``presence_score``, ``presence_threshold``, ``note``, ``notes`` (list of str: why
    an output is missing, e.g. no DICOM SEG; empty when none), and, in the **source
    frame** of the upload (``frame: "source"``: a DICOM's stored Rows x Columns, what a
    viewer overlays on it; :func:`cxrils.io.base.to_source_frame`): ``mask`` (COCO
    RLE, ``size`` [H, W]), ``mask_area``, ``width``, ``height``, ``mask_png`` (0/255
    base64 PNG) and ``dicom_seg`` (for a DICOM upload: the mask as DICOM SEG
    referencing it, base64; else null). For people, in the display frame
    (``display_ops`` turned the source into it; empty for an upload stored in the
    standard orientation): ``image_png`` (the 8-bit image the model saw),
    ``display_mask_png`` (0/255) and ``overlay_png``, all base64 PNG.
``GET /v1/health``, ``GET /v1/info``; the page at ``/``; OpenAPI docs at ``/docs``.

Errors are JSON ``{"detail": "<one sentence in plain words>"}`` (a missing form field
too, never FastAPI's validation list); a browser asking for a page that does not exist
gets a short HTML page with a link back.

Privacy: the upload is written to a private temporary folder only while the request
runs (the image loader reads files) and removed before the response, unless
``keep_uploads_dir`` is set; DICOM header fields never reach responses or logs (the
loader returns pixels and a whitelist of technical fields only, and we return none).
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from fastapi import Depends, FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from cxrils import __version__, templates, vocab
from cxrils.fsutil import atomic_write_bytes
from cxrils.io.base import MIN_IMAGE_SIDE, image_too_small
from cxrils.masks import encode_rle
from cxrils.serve.images import b64, b64_png, overlay

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).with_name("static")


@dataclass
class ServiceConfig:
    """Limits of the service.

    ``max_upload_bytes``: 50 MB by default (issue 10); ``max_instruction_chars``: :data:`cxrils.templates.MAX_INSTRUCTION_CHARS` (500);
    ``min_image_side``: the fewest pixels an image needs on each side
    (:data:`cxrils.io.base.MIN_IMAGE_SIDE`, as ``cxrils predict``); ``keep_uploads_dir``: where to keep uploads
    if the operator asks (None = never kept).
    """

    max_upload_bytes: int = 50 * 1024 * 1024
    max_instruction_chars: int = templates.MAX_INSTRUCTION_CHARS
    min_image_side: int = MIN_IMAGE_SIDE
    keep_uploads_dir: Path | None = None


def check_writable(folder: Path) -> None:
    """Make ``folder`` (for kept uploads) and check that a file can be written in it.

    Raises
    ------
    ValueError
        It is a file, or cannot be made or written, naming it and the reason.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".cxrils-write-check-"):
            pass
    except OSError as err:
        raise ValueError(f"{folder}: cannot keep uploads there: {err.strerror or err}") from None


def _megabytes(n_bytes: int) -> str:
    """``n_bytes`` in MB (2**20 bytes) for messages: "50 MB", "0.0095 MB"."""
    return f"{n_bytes / (1024 * 1024):.3g} MB"


#: Plain-words messages for form fields missing from a request (FastAPI validation).
MISSING_FIELD_MESSAGES: dict[str, str] = {
    "image": "no image was uploaded: choose a PNG, JPEG or DICOM file of a chest X-ray",
    "instruction": "no instruction was given: type what to segment, e.g. 'Segment the effusion in the left lung base.'",
}

_NOT_FOUND_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>cxrils: page not found</title>
<link rel="stylesheet" href="/static/style.css"></head><body><header><h1>cxrils</h1></header><main>
<p>There is no page at this address. <a href="/">Go to the segmentation page</a>.</p></main></body></html>"""


def validation_message(errors: list[dict]) -> str:
    """One sentence for FastAPI's validation ``errors`` (missing or malformed form fields)."""
    words = []
    for err in errors:
        # the field's name: the last text part of the location (a list field adds its index)
        field = next((str(part) for part in reversed(err.get("loc", ())) if isinstance(part, str)), "")
        if err.get("type") == "missing" and field in MISSING_FIELD_MESSAGES:
            words.append(MISSING_FIELD_MESSAGES[field])
        elif field == "image" and "UploadFile" in str(err.get("msg", "")):  # text sent where a file goes
            words.append("the form field 'image' must be a file part (curl: -F image=@FILE), not text")
        else:
            words.append(f"the form field '{field}' is not valid: {err.get('msg', 'bad value')}")
    return "; ".join(dict.fromkeys(words)) or "the request is not a valid form"


async def _one_part_each(request: Request) -> None:
    """Refuse a form with a second ``image`` or ``instruction`` part (HTTP 422): FastAPI
    would otherwise use the last one unseen. The form is parsed once; the endpoint reads
    the same parsed form."""
    form = await request.form()
    for name in ("image", "instruction"):
        n = len(form.getlist(name))
        if n > 1:
            raise HTTPException(422, f"send one {name!r} part per request; this request has {n}")


def example_instructions() -> dict[str, list[str]]:
    """Example instructions per lesion type, rendered by :mod:`cxrils.templates`."""
    out: dict[str, list[str]] = {}
    for t in vocab.LESION_TYPES:
        ex = [templates.render_instruction("global", t)]
        if t != "cardiomegaly":
            ex.insert(0, templates.render_instruction("basic", t, ["right lung base"]))
            ex.insert(1, templates.render_instruction("basic", t, ["lung lower lobe left"]))
        if t in vocab.INFERENCE_LESION_TYPES:
            ex.append(templates.render_instruction("lesion_inference", None, ["left mid zone lung"]))
        out[t] = ex
    return out


def create_app(
    segmenter, *, model_name: str = "", config: ServiceConfig | None = None, load_image: Callable | None = None
) -> FastAPI:
    """Build the app around a loaded model.

    Parameters
    ----------
    segmenter : cxrils.models.base.Segmenter
        Loaded once; ``predict(image uint8 (H, W), instruction) -> Prediction``.
    model_name : str
        Shown by ``/v1/info``.
    config : ServiceConfig, optional
    load_image : callable, optional
        ``path -> LoadedImage``; defaults to :func:`cxrils.io.load_image`.

    Raises
    ------
    ValueError
        If ``config.keep_uploads_dir`` cannot be made or written (:func:`check_writable`).
    """
    from cxrils.extras import missing_module
    from cxrils.io import ImageLoadError
    from cxrils.io import load_image as default_loader
    from cxrils.io.base import to_source_frame
    from cxrils.models.dicom_seg import DicomSegError, dicom_seg_bytes, source_reference
    from cxrils.models.output import segment_label

    dicom_seg_available = missing_module(["highdicom"]) is None

    cfg = config or ServiceConfig()
    if cfg.keep_uploads_dir is not None:
        check_writable(cfg.keep_uploads_dir)
    loader = load_image or default_loader
    lock = threading.Lock()  # one inference at a time: a model's buffers are not thread-safe by contract
    app = FastAPI(
        title="cxrils", version=__version__, description="Instruction-guided lesion segmentation for chest X-rays."
    )

    @app.middleware("http")
    async def limit_body(request, call_next):
        # Refuse oversized bodies before they are spooled (multipart overhead allowed).
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > cfg.max_upload_bytes + 1024 * 1024:
            return JSONResponse(
                {
                    "detail": f"the request is larger than the limit of {_megabytes(cfg.max_upload_bytes)} for "
                    "the image plus 1 MB for the form"
                },
                status_code=413,
            )
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def plain_validation_error(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": validation_message(list(exc.errors()))}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        wants_page = "text/html" in request.headers.get("accept", "") and not request.url.path.startswith("/v1/")
        if exc.status_code == 404 and wants_page:
            return HTMLResponse(_NOT_FOUND_PAGE, status_code=404)
        detail = exc.detail if isinstance(exc.detail, str) else "the request failed"
        if exc.status_code == 404:
            detail = f"there is nothing at {request.url.path}; the API is POST /v1/segment (see /docs)"
        elif exc.status_code == 400 and detail.startswith("Part exceeded maximum size"):  # Starlette's form parser
            return JSONResponse(
                {
                    "detail": "a text form field is larger than 1 MB: the instruction's limit is "
                    f"{cfg.max_instruction_chars} characters, and the image goes in a file part"
                },
                status_code=422,
            )
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed at {request.url.path} (see /docs)"
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.get("/v1/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get("/v1/info")
    def info() -> dict:
        return {
            "name": "cxrils",
            "version": __version__,
            "model": model_name,
            "model_type": getattr(segmenter, "model_type", type(segmenter).__name__),
            "lesion_types": list(vocab.LESION_TYPES),
            "locations": [templates.location_phrase([loc]) for loc in vocab.QUERY_LOCATIONS],
            "examples": example_instructions(),
            "max_upload_bytes": cfg.max_upload_bytes,
            "max_instruction_chars": cfg.max_instruction_chars,
            "dicom_seg": dicom_seg_available,
            "keeps_uploads": cfg.keep_uploads_dir is not None,
        }

    @app.post("/v1/segment", dependencies=[Depends(_one_part_each)])
    def segment(
        image: UploadFile = File(..., description="one PNG, JPEG or DICOM file"),
        instruction: str = Form(..., description="e.g. 'Segment the effusion in the left lung base.'"),
    ) -> dict:
        text = instruction.strip()
        if not text:
            raise HTTPException(422, "the instruction is empty")
        if len(text) > cfg.max_instruction_chars:
            raise HTTPException(
                422, f"the instruction has {len(text)} characters; the limit is {cfg.max_instruction_chars}"
            )
        data = image.file.read(cfg.max_upload_bytes + 1)
        if len(data) > cfg.max_upload_bytes:
            raise HTTPException(413, f"the image is larger than the limit of {_megabytes(cfg.max_upload_bytes)}")
        if not data:
            raise HTTPException(400, "the uploaded file is empty")
        try:
            answered = segmenter.read_instruction(text)
        except ValueError as err:  # InstructionError: says what the model accepts
            raise HTTPException(422, f"the model cannot read this instruction: {err}") from None
        suffix = Path(image.filename or "upload").suffix.lower()[:10]
        t0 = time.perf_counter()
        reference = None
        notes: list[str] = []
        with tempfile.TemporaryDirectory(prefix="cxrils-upload-") as tmp:
            path = Path(tmp) / f"upload{suffix}"
            path.write_bytes(data)
            try:
                loaded = loader(path)
            except ImageLoadError as err:
                reason = getattr(err, "reason", str(err))
                raise HTTPException(400, f"the file could not be read as a chest X-ray image: {reason}") from None
            if getattr(loaded.meta, "format", None) == "dicom":
                if not dicom_seg_available:
                    notes.append("no DICOM SEG: the server lacks highdicom (the 'dicom' extra of cxrils)")
                else:
                    try:
                        reference = source_reference(path)  # header only: the UIDs a SEG needs
                    except DicomSegError as err:
                        notes.append(f"no DICOM SEG: {str(err).replace(str(path) + ': ', '')}")
            if cfg.keep_uploads_dir is not None:
                try:
                    # written whole or not at all (a full disk leaves no partial copy)
                    atomic_write_bytes(cfg.keep_uploads_dir / f"{time.time_ns()}{suffix}", data)
                except OSError as err:  # the folder was checked at start; it went away or filled up
                    log.error("%s: the upload could not be kept: %s", cfg.keep_uploads_dir, err.strerror or err)
                    notes.append("the server could not keep a copy of this upload")
        x = loaded.pixels
        small = image_too_small(x.shape, cfg.min_image_side)
        if small:
            raise HTTPException(422, small)
        try:
            with lock:
                pred = segmenter.predict(x, text)
        except ValueError as err:  # an unusable image, or an instruction a free-text model refuses
            raise HTTPException(422, f"the model could not answer: {err}") from None
        mask = np.asarray(pred.mask, dtype=bool)
        source_mask = to_source_frame(mask, loaded.meta)
        seg = None
        if reference is not None:
            try:
                seg = b64(
                    dicom_seg_bytes(
                        reference,
                        source_mask,
                        segment_label=segment_label(answered, pred.answer),
                        description=f"cxrils: {answered}",
                        model_name=f"cxrils {getattr(segmenter, 'model_type', '')}".strip(),
                    )
                )
            except DicomSegError as err:  # the response still carries PNG and RLE
                notes.append(f"no DICOM SEG: {err}")
        for note in notes:
            log.info("segment: %s", note)
        log.info(
            "segment: image %d x %d pixels (width x height), mask area %d, %.0f ms",
            x.shape[1],
            x.shape[0],
            int(mask.sum()),
            1000 * (time.perf_counter() - t0),
        )
        return {
            "instruction": text,
            "instruction_answered": answered,
            "answer": pred.answer,
            "presence_score": float(pred.presence_score),
            "presence_threshold": pred.presence_threshold,
            "note": pred.note,
            "notes": notes,
            "frame": "source",
            "mask": encode_rle(source_mask),
            "mask_area": int(source_mask.sum()),
            "width": int(source_mask.shape[1]),
            "height": int(source_mask.shape[0]),
            "mask_png": b64_png(source_mask.astype(np.uint8) * 255),
            "dicom_seg": seg,
            "display_ops": list(loaded.meta.display_ops),
            "image_png": b64_png(x),
            "display_mask_png": b64_png(mask.astype(np.uint8) * 255),
            "overlay_png": b64_png(overlay(x, mask)),
        }

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
