"""Constants that change the generated dataset live in Config: overridable (and so
recorded with the run and part of the resume check), not module literals."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from cxrils.config import ConfigError, load_config
from cxrils.grounding.algorithm import algorithm1, refine
from cxrils.types import LesionBox
from cxrils.vision.anatomy.preprocess import prepare


def _lungs(shape=(200, 200)):
    right = np.zeros(shape, bool)
    left = np.zeros(shape, bool)
    right[20:180, 10:95] = True  # patient's right lung on the image's left
    left[20:180, 105:190] = True
    return right, left


def test_refinement_pixel_sizes_scale_from_config_reference_size() -> None:
    # A 3 x 3 speck survives an opening of radius 1 but not of radius 2 (disk of 5 x 5).
    # At reference_size_px = 512 on a 200 px image, open_radius_px = 2 scales to
    # round(2 * 200 / 512) = 1; at reference_size_px = 100 it scales to 4.
    x = np.full((200, 200), 100, np.uint8)
    right, left = _lungs()
    speck = np.zeros((200, 200), bool)
    speck[100:103, 50:53] = True
    cfg = load_config(None, ["grounding.grow_iterations=0"]).grounding
    assert refine(speck, x, right, left, "opacity", cfg).any()
    small = load_config(None, ["grounding.grow_iterations=0", "grounding.reference_size_px=100"]).grounding
    assert not refine(speck, x, right, left, "opacity", small).any()


def test_connectivity_is_a_config_choice() -> None:
    # Two anomaly pixels that touch only diagonally: one component with 8-connectivity,
    # two with 4-connectivity; the box touches only the first pixel.
    x = np.full((200, 200), 100, np.uint8)
    right, left = _lungs()
    anomaly = np.zeros((200, 200), bool)
    anomaly[60:70, 40:50] = True
    anomaly[70:80, 50:60] = True  # meets the first block at one corner
    box = LesionBox(38.0, 58.0, 50.0, 70.0, 0.9, "Lung Opacity")
    overrides = [
        "grounding.grow_iterations=0",
        "grounding.open_radius_px=0",
        "grounding.tau_size=0.0",
        "grounding.tau_anatomy=0.0",
    ]
    eight = load_config(None, overrides).grounding
    four = load_config(None, overrides + ["grounding.connectivity=4"]).grounding
    m8 = algorithm1(x, anomaly, right, right, left, [box], "opacity", eight).mask
    m4 = algorithm1(x, anomaly, right, right, left, [box], "opacity", four).mask
    assert int(m8.sum()) == 200 and int(m4.sum()) == 100
    with pytest.raises(ConfigError, match="connectivity"):
        load_config(None, ["grounding.connectivity=6"])


def test_anatomy_clahe_settings_come_from_config() -> None:
    rng = np.random.default_rng(0)
    # Tiles of 50 x 60 pixels: large enough for the clip limit to matter (OpenCV clips at
    # max(1, clip_limit * tile pixels / 256)).
    x = (rng.random((400, 480)) * 60 + 80).astype(np.uint8)
    default, _ = prepare(x, 400)
    same, _ = prepare(x, 400, load_config().anatomy)
    np.testing.assert_array_equal(default, same)  # the defaults are the shipped weights' settings
    other, _ = prepare(x, 400, load_config(None, ["anatomy.clahe_clip_limit=8.0"]).anatomy)
    grid, _ = prepare(x, 400, load_config(None, ["anatomy.clahe_tile_grid=2"]).anatomy)
    assert not np.array_equal(default, other) and not np.array_equal(default, grid)
    with pytest.raises(ConfigError, match="clahe_tile_grid"):
        load_config(None, ["anatomy.clahe_tile_grid=0"])


# --- Module-level numeric constants (AST scan) -------------------------------------------
#
# Every number that changes what a stage produces (the generated dataset, the shipped
# weights' training data, a model's output) is a field of a config dataclass in
# cxrils/config.py, so that it is recorded and overridable. The scan below finds every
# module-level name bound to a numeric literal (or a tuple / list / arithmetic of them)
# outside config.py; each one found must be listed here with the reason it is not a
# dataset-changing setting. A new such constant fails the test until it moves into
# config.py or is listed with its reason; a listed one that disappears fails too (stale).

_FORMAT = "a fixed property of a file format, protocol or encoding, not a setting"
_WEIGHTS = "fixed by the architecture or the preprocessing of published / shipped weights"
_DISPLAY = "display, logging or storage layout only: outputs' content does not depend on it"
_EVAL = "evaluation or review statistics, not data generation (definitions of the metric)"
_TRAINING = "a training hyperparameter of a model's own recipe, recorded with its weights"
_PAPER = "a number the paper reports, compared against, never used to compute"

ALLOWED_NUMERIC_CONSTANTS: dict[str, str] = {
    "dataset/augment.py:HIST_EQ_PROB": _TRAINING + " (Appendix F: training-time augmentation)",
    "models/light/text.py:_SHOWN_CHARS": _DISPLAY + " (characters of an instruction quoted in an error)",
    "cli/stats.py:LOG_WIDTH": _DISPLAY,
    "dataset/mimic_ils/importer.py:_MASKS_PROBED": "an input check before the import: how many mask paths are "
    "looked for to tell a wrong --masks folder (it changes no record)",
    "progress.py:LOG_REDRAW_INTERVAL_S": _DISPLAY + " (progress-bar redraws in a log file)",
    "dataset/html_report.py:THUMB_SIDE": _DISPLAY,
    "dataset/html_report.py:THUMB_QUALITY": _DISPLAY,
    "dataset/schema.py:SCHEMA_VERSION": _FORMAT,
    "dataset/writer.py:DEFAULT_SHARD_SIZE": _DISPLAY + " (rows per shard; readers concatenate)",
    "evaluation/io.py:_JSONL_CHUNK": _FORMAT + " (read buffer)",
    "evaluation/metrics.py:_IOU_EXP": _FORMAT + " (float64's smallest exponent, exact sums)",
    "evaluation/official.py:IOU_EPS": _EVAL + " (the authors' code)",
    "evaluation/official.py:COUNT_EPS": _EVAL + " (the authors' code)",
    "evaluation/official.py:UNION_EPS": _EVAL + " (the authors' code)",
    "grounding/render.py:KEPT_COLOUR": _DISPLAY,
    "grounding/render.py:REJECTED_COLOUR": _DISPLAY,
    "grounding/render.py:MASK_COLOURS": _DISPLAY,
    "io/dicom.py:_WINDOW_OUT_BITS": _FORMAT + " (DICOM VOI LUT output range)",
    "io/dicom.py:_MAX_LEVELS": _FORMAT + " (largest LUT accepted)",
    "masks.py:_MAX_CHARS_PER_RUN": _FORMAT + " (COCO compressed RLE)",
    "io/base.py:MIN_IMAGE_SIDE": "the least image side the models answer: predict and the service refuse a smaller image, the MIMIC-ILS import skips it as a listed problem (the dataset's images are the release's, never resized below it)",
    "models/dicom_seg.py:LO_MAX": _FORMAT + " (DICOM LO value length)",
    "models/light/calibrate.py:TAU_MASK_GRID": _TRAINING + " (threshold candidates on validate)",
    "models/light/priors.py:WORK_SIDE": _WEIGHTS + " (the light model's prior maps)",
    "models/light/priors.py:CACHE_SIZE": _DISPLAY + " (an in-memory cache)",
    "models/light/priors.py:CTR_SCALE": _WEIGHTS + " (the light model's CTR input)",
    "models/light/text.py:MINILM_DIM": _WEIGHTS + " (all-MiniLM-L6-v2 width)",
    "training/light_train.py:WARMUP_STEPS": _TRAINING + " (as ROSALIA, Appendix F)",
    "models/rosalia/lisa_checkpoint.py:SAM_DECODER_HEADS": _WEIGHTS + " (SAM ViT-H)",
    "models/rosalia/processing.py:SAM_PIXEL_MEAN": _WEIGHTS + " (SAM)",
    "models/rosalia/processing.py:SAM_PIXEL_STD": _WEIGHTS + " (SAM)",
    "models/rosalia/tokenizer.py:IMAGE_TOKEN_INDEX": _FORMAT + " (LISA's token ids)",
    "models/rosalia/tokenizer.py:IGNORE_INDEX": _FORMAT + " (LISA's token ids)",
    "overlay.py:LESION_RGB": _DISPLAY,
    "overlay.py:LESION_ALPHA": _DISPLAY,
    "overlay.py:LABEL_ALPHA": _DISPLAY,
    "overlay.py:TEXT_RGB": _DISPLAY,
    "overlay.py:BOX_RGB": _DISPLAY,
    "overlay.py:BOX_ALPHA": _DISPLAY,
    "sources/base.py:_CSV_FIELD_LIMIT": _FORMAT + " (the csv module's field size cap, lifted)",
    "review/app.py:MAX_BODY_BYTES": _FORMAT + " (request size limit of the review API)",
    "cli/review.py:DEFAULT_PORT": _DISPLAY + " (a command default)",
    "templates.py:MAX_INSTRUCTION_CHARS": "an input limit of predict and the service, not data generation",
    "pipeline/ray_runner.py:RAY_CONNECT_TIMEOUT_S": "an input check of --ray-address (refuses, never changes an output)",
    "review/intervals.py:CONFIDENCE": _EVAL,
    "review/paper.py:TABLE3_REVIEWED": _PAPER,
    "review/paper.py:TABLE3_EXPERT_RANGE": _PAPER,
    "review/sampling.py:DEFAULT_MARGIN": _EVAL + " (a command default)",
    "review/store.py:SCHEMA_VERSION": _FORMAT,
    "vision/anatomy/cxas.py:CXAS_INPUT_SIZE": _WEIGHTS + " (CXAS)",
    "vision/anatomy/cxas.py:IMAGENET_MEAN": _WEIGHTS + " (CXAS)",
    "vision/anatomy/cxas.py:IMAGENET_STD": _WEIGHTS + " (CXAS)",
    "vision/anatomy/hybridgnet.py:CANVAS": _WEIGHTS + " (HybridGNet / CheXmask)",
    "vision/anatomy/hybridgnet.py:BORDER_MAX": _WEIGHTS + " (CheXmask's remove_padding)",
    "vision/anatomy/render.py:ZONE_COLOUR": _DISPLAY,
    "vision/anatomy/render.py:LOBE_COLOUR": _DISPLAY,
    "vision/anatomy/render.py:VISIBLE_COLOUR": _DISPLAY,
    "vision/anomaly/base.py:I_MAX": _FORMAT + " (the uint8 image's maximum)",
    "vision/anomaly/radedit.py:INVERSION_ETA": _WEIGHTS + " (RadEdit's pipeline)",
    "vision/detection/centernet.py:STRIDE": _WEIGHTS + " (the built-in detector's output stride)",
    "vision/detection/onnx_yolo.py:PAD_VALUE": _WEIGHTS + " (YOLO letterbox grey)",
}


def _is_numeric(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_numeric(node.left) and _is_numeric(node.right)
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_is_numeric(e) for e in node.elts)
    return False


def numeric_constants(source: str) -> list[str]:
    """Names bound at module level to a numeric literal (or a tuple/list/arithmetic of
    them) in Python ``source``."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if _is_numeric(value):
            out += [t.id for t in targets if isinstance(t, ast.Name)]
    return out


def _package_constants() -> dict[str, str]:
    import cxrils

    root = Path(cxrils.__file__).resolve().parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "config.py":
            continue
        for name in numeric_constants(path.read_text(encoding="utf-8")):
            found[f"{rel}:{name}"] = rel
    return found


def test_the_scan_finds_numeric_module_constants() -> None:
    src = "A = 0.5\nB: int = 3\nC = (1, -2.0)\nD = 2 ** 8\nE = 'text'\nF = True\nG = load()\ndef f():\n    H = 1\n"
    assert numeric_constants(src) == ["A", "B", "C", "D"]


def test_no_numeric_constant_outside_config_without_a_reason() -> None:
    found = _package_constants()
    unexplained = sorted(set(found) - set(ALLOWED_NUMERIC_CONSTANTS))
    assert not unexplained, (
        f"module-level numeric constants outside cxrils/config.py: {unexplained}; a number that changes "
        "a stage's output belongs in a config dataclass (with its source), anything else needs a reason in "
        "ALLOWED_NUMERIC_CONSTANTS"
    )
    stale = sorted(k for k in ALLOWED_NUMERIC_CONSTANTS if k not in found)
    assert not stale, f"ALLOWED_NUMERIC_CONSTANTS lists constants that no longer exist: {stale}"


def test_moved_constants_are_config_fields() -> None:
    # The constants issue 30 moved: overridable (or, for the training data, frozen
    # dataclass fields) and checked.
    cfg = load_config(
        None,
        [
            "inputs.iu_sections=findings,impression",
            "anatomy.cxas_threshold=0.4",
            "instructions.paraphrase_max_chars=100",
            "report.clear_before_chars=5",
        ],
    )
    assert cfg.inputs.iu_sections == ("findings", "impression")
    assert (cfg.anatomy.cxas_threshold, cfg.instructions.paraphrase_max_chars) == (0.4, 100)
    assert cfg.report.clear_before_chars == 5
    with pytest.raises(ConfigError, match="iu_sections"):
        load_config(None, ["inputs.iu_sections=findings,findings"])
    with pytest.raises(ConfigError, match="cxas_threshold"):
        load_config(None, ["anatomy.cxas_threshold=1.5"])
    from cxrils.config import AnatomyDataConfig, LightDataConfig

    assert 0 < LightDataConfig().validate_fraction < 1 and LightDataConfig().cardiomegaly_repeat >= 1
    assert 0 < AnatomyDataConfig().test_percent < 100
