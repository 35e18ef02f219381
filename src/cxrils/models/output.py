"""Files of one prediction: mask PNG, overlay, ``prediction.json`` (COCO RLE), and,
for a DICOM input, the mask as DICOM SEG (:mod:`cxrils.models.dicom_seg`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cxrils import templates
from cxrils.fsutil import atomic_path, atomic_write_json
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


def write_prediction(out_dir: str | Path, x: np.ndarray, instruction: str, pred: Prediction, *,
                     answered: str | None = None, dicom_source: str | Path | None = None,
                     model_name: str = "cxrils") -> Path:
    """Write one prediction's files into ``out_dir`` (created), each atomically.

    Files: ``mask.png`` (0/255), ``overlay.png`` (mask tinted, legend, R/L side
    markers), ``prediction.json`` (instruction as given, ``instruction_answered``,
    answer, presence_score, presence_threshold, note, mask as COCO RLE, mask_area, files) and, when
    ``dicom_source`` is given, :data:`DICOM_SEG_NAME`.

    Parameters
    ----------
    x : ndarray of uint8, shape (H, W)
        The image the model saw.
    instruction : str
        As the user gave it.
    pred : Prediction
    answered : str, optional
        The instruction as the model read it (:meth:`Segmenter.read_instruction`);
        default: ``instruction``.
    dicom_source : path, optional
        The DICOM file ``x`` was loaded from: also write the mask as DICOM SEG.
    model_name : str
        Named in the SEG.

    Raises
    ------
    cxrils.extras.MissingExtraError
        With ``dicom_source``, if highdicom (extra ``dicom``) is missing.
    cxrils.models.dicom_seg.DicomSegError
        If the SEG cannot reference the source.
    """
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    answered = answered if answered is not None else instruction
    files = {"mask_png": "mask.png", "overlay_png": "overlay.png"}
    if dicom_source is not None:
        from cxrils.models.dicom_seg import write_dicom_seg

        write_dicom_seg(out / DICOM_SEG_NAME, dicom_source, pred.mask, segment_label=segment_label(answered, pred.answer),
                        description=f"cxrils: {answered}", model_name=model_name)
        files["dicom_seg"] = DICOM_SEG_NAME
    with atomic_path(out / "mask.png", suffix=".png") as tmp:
        Image.fromarray(pred.mask.astype(np.uint8) * 255).save(tmp, format="PNG")
    with atomic_path(out / "overlay.png", suffix=".png") as tmp:
        Image.fromarray(mask_overlay(x, pred.mask, label="predicted mask")).save(tmp, format="PNG")
    atomic_write_json(out / "prediction.json", {
        "instruction": instruction, "instruction_answered": answered, "answer": pred.answer,
        "presence_score": float(pred.presence_score), "presence_threshold": pred.presence_threshold,
        "note": pred.note,
        "mask": dict(encode_rle(pred.mask)),
        "mask_area": int(pred.mask.sum()), "files": files,
    })
    return out
