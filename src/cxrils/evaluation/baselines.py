"""Reference baselines any user can run against a dataset (paper section 5, Table 4).

* ``always-empty``: an empty mask for every record, and the negative answer of the
  instruction's template ("[SEG] There is no {target} in the {location}."). It scores
  gIoU 0, cIoU 0, N-Acc 1: the reason gIoU/cIoU and N-Acc are always reported apart.
* ``whole-lung``: the union of the anatomy masks of the lung regions the instruction
  names (basic and lesion-inference instructions), or of both lungs (global
  instructions) -- the failure mode the paper shows for general-domain models
  (section 5, Figure 6). Masks only: its predictions carry no answers.
* ``oracle``: the reference masks and answers; must score 1.0 everywhere (a self-check
  of the evaluation and of the dataset).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from cxrils.config import Config
from cxrils.evaluation.io import EvaluationError, iter_reference_batches, mask_column
from cxrils.masks import RLE, encode_rle
from cxrils.templates import TemplateError, parse_instruction, render_answer
from cxrils.types import AnatomyMasks

BASELINES: tuple[str, ...] = ("always-empty", "whole-lung", "oracle")
#: Baselines whose predictions carry answers (text accuracy is scored).
BASELINES_WITH_ANSWERS: frozenset[str] = frozenset({"always-empty", "oracle"})
#: The lungs a global instruction ("Segment the {target}.") covers (patient sides).
BOTH_LUNGS: tuple[str, ...] = ("right lung", "left lung")

AnatomyFn = Callable[[np.ndarray], AnatomyMasks]


def default_anatomy_fn(cfg: Config | None = None) -> AnatomyFn:
    """The configured anatomy segmenter's ``segment`` (``cfg.backends.anatomy``, "builtin"
    by default), imported lazily.

    Raises
    ------
    EvaluationError
        If the anatomy stage (:mod:`cxrils.vision.anatomy`) is not available or the
        backend cannot be built (unknown name, missing package or weights).
    """
    cfg = cfg or Config()
    try:
        from cxrils.vision.anatomy import get_segmenter
    except ImportError as err:
        raise EvaluationError(
            f"the whole-lung baseline needs the anatomy stage (cxrils.vision.anatomy), which cannot be imported: {err}"
        ) from err
    try:
        return get_segmenter(cfg.backends.anatomy, cfg).segment
    except RuntimeError as err:  # AnatomyBackendError: unknown backend, missing package or weights
        raise EvaluationError(
            f"the whole-lung baseline cannot build the anatomy backend {cfg.backends.anatomy!r}: {err}"
        ) from err


def _negative_answer(instruction: str, instruction_type: str, target: str | None, locations: list[str]) -> str | None:
    """The instruction's negative answer (Table 2). Parsed from the instruction text; for
    a text that is no template (a paraphrase, Appendix C.3) built from the record's
    ``instruction_type``, ``target`` and ``locations`` columns; None if neither works."""
    try:
        parsed = parse_instruction(instruction)
        instruction_type, target, locations = parsed.instruction_type, parsed.target, list(parsed.locations)
    except TemplateError:
        if not target:
            return None
    try:
        return render_answer(instruction_type, "negative", target=target, locations=locations)
    except TemplateError:
        return None


def _load_x(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            if im.mode not in ("L", "P"):
                raise EvaluationError(f"{path}: expected an 8-bit grayscale image (mode L), got mode {im.mode}")
            return np.asarray(im.convert("L"), dtype=np.uint8)
    except (OSError, UnidentifiedImageError) as err:
        raise EvaluationError(f"{path}: cannot read image: {err}") from err


def whole_lung_mask(anatomy: AnatomyMasks, instruction_type: str, locations: list[str]) -> np.ndarray:
    """The whole-lung baseline's mask for one instruction.

    Parameters
    ----------
    anatomy : AnatomyMasks
        Masks of the image, bool (H, W), CXAS labels (patient sides).
    instruction_type : {"basic", "global", "lesion_inference"}
    locations : list of str
        Instruction locations (:data:`cxrils.vocab.INSTRUCTION_LOCATIONS`) the
        instruction names; ignored for global instructions, which get both lungs.

    Returns
    -------
    ndarray of bool, shape (H, W)

    Raises
    ------
    KeyError
        If ``anatomy`` lacks a named region.
    """
    regions = BOTH_LUNGS if instruction_type == "global" or not locations else tuple(locations)
    return anatomy.union(regions)


def baseline_predictions(
    name: str,
    dataset_dir: str | Path,
    *,
    split: str | None = "test",
    paraphrases: str = "exclude",
    anatomy_fn: AnatomyFn | None = None,
    batch_size: int = 256,
) -> Iterator[dict[str, Any]]:
    """Predictions of a baseline for every record of a split, in dataset order.

    Parameters
    ----------
    name : {"always-empty", "whole-lung", "oracle"}
    dataset_dir : path
        A cxrils dataset folder.
    split : str or None
        Split to predict ("test"); None or "all" for every record.
    paraphrases : {"exclude", "include", "only"}
        Rows with paraphrased instructions to cover (as in
        :func:`cxrils.evaluation.evaluate_predictions`).
    anatomy_fn : callable, optional
        ``x uint8 (H, W) -> AnatomyMasks`` for ``whole-lung``; default
        :func:`default_anatomy_fn`. Called once per image (small cache).
    batch_size : int
        Records read at a time.

    Yields
    ------
    dict
        ``{"record_id": str, "mask": {"size": [H, W], "counts": str}, "answer": str | None}``.

    Raises
    ------
    EvaluationError
        For an unknown baseline, an unreadable dataset or image, or anatomy masks of
        the wrong size.
    """
    if name not in BASELINES:
        raise EvaluationError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
    root = Path(dataset_dir)
    columns = ["record_id", "mask", "answer", "instruction", "instruction_type", "locations", "image_path"]
    segment = anatomy_fn or (default_anatomy_fn() if name == "whole-lung" else None)
    cache: OrderedDict[str, AnatomyMasks] = OrderedDict()
    empty: dict[tuple[int, int], RLE] = {}
    for batch in iter_reference_batches(root, split, columns, batch_size, optional=["target"], paraphrases=paraphrases):
        counts, heights, widths = mask_column(batch.column("mask"), str(root))
        targets = batch.column("target").to_pylist() if "target" in batch.schema.names else [None] * batch.num_rows
        rows = zip(
            *(
                batch.column(c).to_pylist()
                for c in ("record_id", "answer", "instruction", "instruction_type", "locations", "image_path")
            ),
            targets,
        )
        for (rid, answer, instruction, itype, locations, image_path, target), c, h, w in zip(
            rows, counts, heights, widths
        ):
            size = (int(h), int(w))
            if name == "oracle":
                yield {"record_id": rid, "mask": {"size": list(size), "counts": c}, "answer": answer}
                continue
            if name == "always-empty":
                if size not in empty:
                    empty[size] = encode_rle(np.zeros(size, dtype=bool))
                yield {
                    "record_id": rid,
                    "mask": empty[size],
                    "answer": _negative_answer(instruction, itype, target, list(locations or [])),
                }
                continue
            if image_path not in cache:
                assert segment is not None  # every baseline but whole-lung has returned above
                anatomy = segment(_load_x(root / image_path))
                if tuple(anatomy.shape) != size:
                    raise EvaluationError(
                        f"{root / image_path}: anatomy masks are {anatomy.shape}, "
                        f"the record's mask is {size} (record {rid!r})"
                    )
                cache[image_path] = anatomy
                if len(cache) > 4:
                    cache.popitem(last=False)
            try:
                mask = whole_lung_mask(cache[image_path], itype, list(locations or []))
            except KeyError as err:
                raise EvaluationError(f"record {rid!r}: {err.args[0]}") from None
            yield {"record_id": rid, "mask": encode_rle(mask), "answer": None}
