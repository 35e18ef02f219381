"""Files of one prediction: mask PNG, overlay, ``prediction.json`` (COCO RLE), and,
for a DICOM input, the mask as DICOM SEG (:mod:`cxrils.models.dicom_seg`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cxrils import templates
from cxrils.fsutil import atomic_path, atomic_write_json
from cxrils.io.base import ImageMeta, source_frame_record, to_source_frame
from cxrils.masks import encode_rle
from cxrils.models.base import Prediction
from cxrils.overlay import mask_overlay

#: File name of the DICOM SEG written next to the PNG mask.
DICOM_SEG_NAME = "mask.seg.dcm"


def segment_label(answered: str, answer: str) -> str:
    """What a mask shows, for a SEG's Segment Label: the lesion a lesion-inference
    answer names, else the instruction's target, else "lesion" (free text)."""
    try:
        parsed = templates.parse_instruction(answered)
    except templates.TemplateError:
        return "lesion"
    if parsed.instruction_type == "lesion_inference":
        try:
            return templates.parse_answer(answer, "lesion_inference").lesion or "opacity"
        except templates.TemplateError:
            return "opacity"
    return parsed.target or "lesion"


def write_prediction(
    out_dir: str | Path,
    x: np.ndarray,
    instruction: str,
    pred: Prediction,
    *,
    meta: ImageMeta,
    answered: str | None = None,
    dicom_source: str | Path | None = None,
    model_name: str = "cxrils",
) -> list[str]:
    """Write one prediction's files into ``out_dir`` (created), each atomically.

    Files: ``mask.png`` (0/255), ``prediction.json`` (instruction as given,
    ``instruction_answered``, answer, presence_score, presence_threshold, note, mask as
    COCO RLE, mask_area, ``frame``, ``display_ops``, files) and, when ``dicom_source`` is
    given, :data:`DICOM_SEG_NAME` are in the **source frame** (:func:`cxrils.io.base.to_source_frame`:
    a DICOM's stored Rows x Columns, what a viewer overlays them on); ``overlay.png``
    (mask tinted, legend, R/L side markers) is for people and in the display frame of
    ``x`` (``prediction.json`` says so: ``"overlay_frame": "display"``).

    Parameters
    ----------
    x : ndarray of uint8, shape (H, W)
        The image the model saw (display frame).
    instruction : str
        As the user gave it.
    pred : Prediction
        Its ``mask`` is aligned with ``x``.
    meta : ImageMeta
        Of the loaded image (``display_ops`` says how ``x`` was turned from the source).
    answered : str, optional
        The instruction as the model read it (:meth:`Segmenter.read_instruction`);
        default: ``instruction``.
    dicom_source : path, optional
        The DICOM file ``x`` was loaded from: also write the mask as DICOM SEG.
    model_name : str
        Named in the SEG.

    Returns
    -------
    list of str
        Why a requested SEG was not written (one line each; empty when all was written).
        The other files are written in any case.

    Raises
    ------
    cxrils.extras.MissingExtraError
        With ``dicom_source``, if highdicom (extra ``dicom``) is missing.
    """
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    answered = answered if answered is not None else instruction
    mask = to_source_frame(np.asarray(pred.mask, dtype=bool), meta)
    files = {"mask_png": "mask.png", "overlay_png": "overlay.png"}
    notes: list[str] = []
    if dicom_source is not None:
        from cxrils.models.dicom_seg import DicomSegError, write_dicom_seg

        try:
            write_dicom_seg(
                out / DICOM_SEG_NAME,
                dicom_source,
                mask,
                segment_label=segment_label(answered, pred.answer),
                description=f"cxrils: {answered}",
                model_name=model_name,
            )
            files["dicom_seg"] = DICOM_SEG_NAME
        except DicomSegError as err:
            notes.append(str(err))
    with atomic_path(out / "mask.png", suffix=".png") as tmp:
        Image.fromarray(mask.astype(np.uint8) * 255).save(tmp, format="PNG")
    with atomic_path(out / "overlay.png", suffix=".png") as tmp:
        Image.fromarray(mask_overlay(x, pred.mask, label="predicted mask")).save(tmp, format="PNG")
    atomic_write_json(
        out / "prediction.json",
        {
            "instruction": instruction,
            "instruction_answered": answered,
            "answer": pred.answer,
            "presence_score": float(pred.presence_score),
            "presence_threshold": pred.presence_threshold,
            "note": pred.note,
            "mask": dict(encode_rle(mask)),
            "mask_area": int(mask.sum()),
            **source_frame_record(meta),
            "files": files,
        },
    )
    return notes
