"""The released MIMIC-CXR-Ext-ILS 1.0.0 layout, as KAIST-Edlab/ROSALIA's code reads it.

Restated from ``utils/reason_seg_dataset.py`` (``ReasonSegDataset``) and ``train.sh``:

* ``mimic_ils_instruction_answer.json``: ``{split: {sample_key: item}}`` with splits
  ``train``, ``val``, ``test``; ``item["image_path"]`` is joined to ``--base_image_dir``
  (MIMIC-CXR-JPG 2.1.0 ``files/``); ``item["instruction_answer_pairs"]`` holds
  ``positive_pairs`` (``instruction``, ``answer``, ``target``, ``seg_mask_path`` joined to
  ``--base_mask_dir``, the release's ``lesion_mask/``) and ``negative_pairs``
  (``instruction``, ``answer``, ``target``; the mask is all zero).
* ``target`` is what the dataset class calls ``disease``: the lesion type.
* a mask pixel is foreground where the PNG equals 255 (``mask == 255`` on the 3-channel
  ``cv2.imread``; a pixel counts when all three channels are 255).
* image and mask are resized independently to the longest side 1024 (SAM's
  ``ResizeLongestSide``: bilinear on the PIL image, nearest for the mask, new size
  ``int(side * 1024 / longest + 0.5)``, ROSALIA's ``model/segment_anything/utils/
  transforms.py`` ``apply_image`` / ``apply_mask``) and both are zero-padded at the
  bottom and right to 1024 x 1024 (``preprocess`` / ``preprocess_mask``). So a mask whose
  size differs from its image keeps its own aspect and is anchored at the top left of
  the image's frame (cut or zero-filled at the image's edge), never stretched onto the
  image (:func:`read_mask_png`).

Split names: ``train`` -> ``train``, ``val`` -> ``validate``, ``test`` -> ``test``
(cxrils' names, :data:`cxrils.dataset.splits.SPLITS`); the paper's splits follow the
official MIMIC-CXR partition (section 3.2), so they are kept as released.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import numpy as np

from cxrils import templates, vocab
from cxrils.dataset.writer import DatasetError

#: The release's file and folder names (PhysioNet MIMIC-CXR-Ext-ILS 1.0.0, train.sh).
JSON_NAME = "mimic_ils_instruction_answer.json"
MASK_DIR_NAME = "lesion_mask"
#: Release split -> cxrils split, and back.
SPLIT_FROM_RELEASE: dict[str, str] = {"train": "train", "val": "validate", "test": "test"}
SPLIT_TO_RELEASE: dict[str, str] = {v: k for k, v in SPLIT_FROM_RELEASE.items()}
#: JSON keys read by ReasonSegDataset.
PAIRS_KEY = "instruction_answer_pairs"
POSITIVE_KEY, NEGATIVE_KEY = "positive_pairs", "negative_pairs"
PAIR_KEYS = ("instruction", "answer", "target")
MASK_KEY = "seg_mask_path"
#: Extra key written by ``cxrils export --format mimic-ils`` (ignored by the authors'
#: loader, which reads only the keys above): the certainty the texts cannot carry.
CERTAINTY_KEY = "certainty"

_SAFE_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$")


def preprocess_shape(h: int, w: int, side: int) -> tuple[int, int]:
    """segment-anything ``ResizeLongestSide.get_preprocess_shape(h, w, side)``: the longest
    side becomes ``side`` (enlarging too), each side ``int(side * scale + 0.5)``.

    Parameters
    ----------
    h, w : int
        Rows and columns of the array to resize, pixels.
    side : int
        Target longest side, pixels (SAM's 1024).

    Returns
    -------
    (int, int)
        (rows, columns) after the resize.
    """
    scale = side * 1.0 / max(h, w)
    return int(h * scale + 0.5), int(w * scale + 0.5)


def resized_shape(h: int, w: int, max_side: int) -> tuple[int, int]:
    """(h, w) after SAM's ``ResizeLongestSide(max_side).get_preprocess_shape``; never
    enlarges; ``max_side`` 0 keeps the size."""
    if max_side <= 0 or max(h, w) <= max_side:
        return h, w
    return preprocess_shape(h, w, max_side)


def image_id_for(sample_key: str, image_path: str) -> str:
    """The cxrils image id of a release sample.

    The sample key itself when it is a plain file-name-safe id; otherwise the image
    file's stem (the MIMIC-CXR ``dicom_id``) plus 8 hex digits of SHA-1 of the key.
    """
    if _SAFE_KEY.match(sample_key):
        return sample_key
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", PurePosixPath(image_path).stem)[:150] or "sample"
    return f"{stem}-{hashlib.sha1(sample_key.encode('utf-8')).hexdigest()[:8]}"


def ids_from_image_path(image_path: str) -> tuple[str, str]:
    """(patient_id, study_id) from a MIMIC-CXR-JPG style path ``.../pXXXXXXXX/sYYYYYYYY/dicom.jpg``
    (the folder names, as the cxrils pipeline names them); ("", "") for shorter paths."""
    parts = PurePosixPath(image_path).parts
    return (parts[-3], parts[-2]) if len(parts) >= 3 else ("", "")


def read_mask_png(
    path: Path, image_shape: tuple[int, int], foreground: int = 255, out_shape: tuple[int, int] | None = None
) -> tuple[np.ndarray, bool]:
    """A release mask as bool at ``out_shape``, the grid its image is stored on.

    Foreground = every colour channel equals ``foreground``, the pixels read as
    ``cv2.imread`` reads them: 16-bit PNGs reduced to 8 bits, 1-bit and grey+alpha PNGs
    as their grey levels (0/255 for 1-bit), palette PNGs as their colours. The mask is placed as the authors' loader
    places it (``reason_seg_dataset.py``): resized with nearest neighbour by its own
    aspect, to ``ResizeLongestSide.get_preprocess_shape(mask_h, mask_w, L)`` with ``L`` the
    longest side of ``out_shape`` (the frame side; 1024 in the authors' loader), anchored
    at the top left and cut to ``out_shape`` (zeros where it is smaller). A mask of the
    image's own size therefore becomes exactly the nearest resize of it to ``out_shape``;
    one of another size is not stretched onto the image.

    Parameters
    ----------
    path : Path
    image_shape : (int, int)
        (H, W) of the image the mask belongs to, as read from its file.
    foreground : int
        Grey level of mask pixels (255 in the release).
    out_shape : (int, int), optional
        (h, w) of the stored image (``get_preprocess_shape(H, W, max_side)``); default
        ``image_shape``.

    Returns
    -------
    mask : ndarray of bool, shape ``out_shape``
    differs : bool
        True when the PNG's size differed from ``image_shape``.

    Raises
    ------
    OSError, ValueError
        If the file cannot be read as an image.
    """
    from PIL import Image

    with Image.open(path) as im:
        im.load()
        # as cv2.imread reads them (the authors' loader): a 1-bit or grey+alpha PNG as its
        # grey levels, a palette PNG as the colours its indices stand for
        if im.mode in ("1", "LA"):
            arr = np.asarray(im.convert("L"))
        elif im.mode in ("P", "PA"):
            arr = np.asarray(im.convert("RGB"))
        else:
            arr = np.asarray(im)
        if im.mode.startswith("I;16") or arr.dtype == np.uint16:
            arr = (arr.astype(np.uint32) >> 8).astype(np.uint8)
    if arr.ndim == 3:
        fg = np.all(arr[..., :3] == foreground, axis=-1)
    elif arr.ndim == 2:
        fg = arr == foreground
    else:
        raise ValueError(f"unexpected mask array shape {arr.shape}")
    differs = fg.shape != tuple(image_shape)
    out_h, out_w = out_shape if out_shape is not None else tuple(image_shape)
    fg_h, fg_w = fg.shape
    h, w = preprocess_shape(fg_h, fg_w, max(out_h, out_w))
    if (h, w) != fg.shape:
        fg = np.asarray(Image.fromarray(fg.astype(np.uint8) * 255).resize((w, h), Image.Resampling.NEAREST)) > 0
    mask = np.zeros((out_h, out_w), dtype=bool)
    mask[: min(h, out_h), : min(w, out_w)] = fg[:out_h, :out_w]
    return mask, differs


@dataclass
class PairFields:
    """Record fields parsed from one release pair (:func:`parse_pair`)."""

    lesion_type: str
    target: str
    instruction_type: str
    locations: list[str]
    certainty: str
    problems: list[str] = field(default_factory=list)


def _certainty(
    itype: str, polarity: str, ins_target: str, lesion: str, ans: templates.ParsedText | None, hint: Any
) -> str:
    if polarity != "positive":
        return ""
    if isinstance(hint, str) and hint in vocab.CERTAINTIES:
        return hint
    if itype == "lesion_inference" and ans is not None and ans.certainty:
        return ans.certainty
    if itype == "basic" and ins_target == "opacity" and lesion != "opacity":
        return "tentative"  # section 3.2: basic instructions of tentative findings name "opacity"
    if itype == "basic" and ins_target == lesion and lesion not in vocab.ORGAN_LESION_TYPES + ("opacity",):
        return "definitive"
    return ""  # the texts do not say (global positives, cardiomegaly, opacity)


def parse_pair(
    instruction: str, answer: str, json_target: Any, polarity: str, certainty_hint: Any = None
) -> PairFields:
    """Instruction type, target, lesion type, locations and certainty of a release pair.

    Texts are parsed with :mod:`cxrils.templates` (Table 2). ``lesion_type`` is the
    release's ``target`` when it is one of :data:`cxrils.vocab.LESION_TYPES`, else the
    lesion an answer or instruction names. Certainty comes from the texts where they
    carry it (lesion-inference positives; basic positives naming "opacity" for another
    lesion type are tentative, naming the lesion type itself definitive), from
    ``certainty_hint`` (the extra key of cxrils exports) when given, else "".

    Non-template texts keep the record with empty instruction type, locations and
    certainty, and a problem says so.

    Raises
    ------
    ValueError
        If no lesion type can be found (the pair cannot be a cxrils record).
    """
    problems: list[str] = []
    ins = ans = None
    try:
        ins = templates.parse_instruction(instruction)
    except templates.TemplateError:
        problems.append("instruction is not a Table 2 template text")
    if ins is not None:
        try:
            ans = templates.parse_answer(answer, ins.instruction_type)
        except templates.TemplateError:
            problems.append("answer is not a Table 2 template text")
    if ans is not None and ans.polarity != polarity:
        problems.append(f"answer reads {ans.polarity} but the pair is listed as {polarity}")
    lesion = json_target if isinstance(json_target, str) and json_target in vocab.LESION_TYPES else None
    if lesion is None:
        lesion = (ans.lesion if ans is not None and ans.lesion else None) or (
            ins.target if ins is not None and ins.target in vocab.LESION_TYPES else None
        )
        if lesion is None:
            raise ValueError(f"no lesion type: target {json_target!r} is not one of {vocab.LESION_TYPES}")
        problems.append(f"target {json_target!r} is not a lesion type; {lesion!r} taken from the texts")
    if ins is None:
        return PairFields(lesion, "", "", [], "", problems)
    locs = set(ins.locations) | set(ans.locations if ans is not None else ())
    order = list(vocab.INSTRUCTION_LOCATIONS) + list(vocab.ORGAN_LOCATIONS.values())
    locations = sorted(locs, key=lambda loc: order.index(loc) if loc in order else len(order))
    target = ins.target or "opacity"
    certainty = _certainty(ins.instruction_type, polarity, target, lesion, ans, certainty_hint)
    return PairFields(lesion, target, ins.instruction_type, locations, certainty, problems)


def iter_samples(fh: IO[bytes], name: str) -> Iterator[tuple[str, str, Any]]:
    """Stream ``(release split, sample key, item)`` from the release JSON, one sample at a
    time (ijson; memory does not grow with the file).

    Raises
    ------
    DatasetError
        If the JSON is malformed or its top level is not ``{split: {key: item}}``
        (naming ``name`` and the byte offset).
    """
    import ijson

    builder = None
    depth_item = 0
    split: str | None = None
    key: str | None = None
    level = 0  # 0: outside, 1: inside the top map, 2: inside a split map
    try:
        for _prefix, event, value in ijson.parse(fh, use_float=True):
            if builder is not None:
                builder.event(event, value)
                if event in ("start_map", "start_array"):
                    depth_item += 1
                elif event in ("end_map", "end_array"):
                    depth_item -= 1
                if depth_item == 0:
                    assert split is not None and key is not None  # set by the enclosing maps
                    yield split, key, builder.value
                    builder = None
                continue
            if level == 0:
                if event != "start_map":
                    raise DatasetError(f"{name}: the top level must be an object {{split: {{sample_key: ...}}}}")
                level = 1
            elif level == 1:
                if event == "map_key":
                    split = value
                elif event == "start_map":
                    level = 2
                elif event == "end_map":
                    level = 0
                else:
                    raise DatasetError(f"{name}: split {split!r} must be an object of samples")
            elif level == 2:
                if event == "map_key":
                    key = value
                elif event == "end_map":
                    level = 1
                else:
                    builder = ijson.ObjectBuilder()
                    builder.event(event, value)
                    if event in ("start_map", "start_array"):
                        depth_item = 1
                    else:  # a scalar item: handed on as is, rejected by the caller
                        assert split is not None and key is not None  # set by the enclosing maps
                        yield split, key, value
                        builder = None
    except ijson.JSONError as err:
        where = getattr(fh, "tell", lambda: "?")()
        raise DatasetError(f"{name}: malformed JSON near byte {where}: {err}") from err
