"""Helpers of the pipeline tests: a small synthetic input, dataset comparison, the
environment of child processes."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

FAKE = "fake_stages:FakeStages"
#: The full step chain of the paper: location masks from x_hat, cross-checked.
X_HAT = ["backends.anatomy_on_x_hat=yes"]


def config():
    """A Config with the paper's full step chain (:data:`X_HAT`)."""
    from cxrils.config import load_config

    return load_config(None, X_HAT)


REPORTS = [
    "Small left effusion. No pneumonia.",
    "Right opacity and right consolidation.",
    "Heart is normal. Left atelectasis.",
    "Edema in the right lung. Left effusion.",
    "No acute process.",
]


def subprocess_env() -> dict[str, str]:
    """Environment for child processes (workers, Ray, the CLI) that can import
    cxrils and the fake stages."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _image(i: int, size: int = 48) -> np.ndarray:
    rng = np.random.default_rng(i)
    x = rng.integers(40, 90, (size, size)).astype(np.uint8)
    r, c = 10 + (i * 7) % 24, 8 + (i * 11) % 30
    x[r : r + 8, c : c + 8] = 200
    return x


def make_input(folder: Path, n: int = 12, bad: bool = True) -> Path:
    """A generic CSV input of ``n`` synthetic images; with ``bad`` it also has an
    unreadable image, an empty report, a lateral view, a black image (no lungs: fails
    the frontal-view plausibility), a bright image (fails the cross-check), an image
    whose grounding raises and one whose records the dataset writer rejects."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "img").mkdir(exist_ok=True)
    rows = []
    for i in range(n):
        Image.fromarray(_image(i)).save(folder / "img" / f"im{i:03d}.png")
        rows.append(
            {
                "image_path": f"img/im{i:03d}.png",
                "report": REPORTS[i % len(REPORTS)],
                "study_id": f"s{i // 2}",
                "patient_id": f"p{i // 4}",
                "view": "PA",
            }
        )
    if bad:
        (folder / "img" / "broken.png").write_bytes(b"not a png")
        Image.fromarray(np.zeros((48, 48), np.uint8)).save(folder / "img" / "black.png")
        Image.fromarray(np.full((48, 48), 150, np.uint8)).save(folder / "img" / "bright.png")
        Image.fromarray(_image(99)).save(folder / "img" / "nogrounding.png")
        Image.fromarray(_image(98)).save(folder / "img" / "lat.png")
        Image.fromarray(_image(97)).save(folder / "img" / "empty.png")
        Image.fromarray(_image(96)).save(folder / "img" / "badrecords.png")
        rows[3:3] = [
            {"image_path": "img/broken.png", "report": REPORTS[0], "study_id": "sb", "patient_id": "pb", "view": "PA"},
            {"image_path": "img/empty.png", "report": "  ", "study_id": "se", "patient_id": "pe", "view": "AP"},
            {
                "image_path": "img/lat.png",
                "report": REPORTS[1],
                "study_id": "sl",
                "patient_id": "pl",
                "view": "LATERAL",
            },
            {"image_path": "img/black.png", "report": REPORTS[1], "study_id": "sk", "patient_id": "pk", "view": "PA"},
            {"image_path": "img/bright.png", "report": REPORTS[1], "study_id": "sc", "patient_id": "pc", "view": "PA"},
            {
                "image_path": "img/nogrounding.png",
                "report": REPORTS[3],
                "study_id": "sn",
                "patient_id": "pn",
                "view": "",
            },
            {
                "image_path": "img/badrecords.png",
                "report": REPORTS[0],
                "study_id": "sr",
                "patient_id": "pr",
                "view": "PA",
            },
        ]
    path = folder / "pairs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


#: The stages of the fake models with the real records (absent-type negatives).
REAL_RECORDS = "fake_stages:FakeStagesRealRecords"
#: Types absent from REPORTS[0] ("Small left effusion. No pneumonia."), each with at most
#: one negative per study (Appendix C.2); cardiomegaly follows the CTR rule instead.
ABSENT_OF_REPORT_0 = ("atelectasis", "consolidation", "edema", "pneumonia")


def study_of_three(
    folder: Path, first: str = "img/broken.png", rest: tuple[str, ...] = ("img/im000.png", "img/im001.png")
) -> Path:
    """A generic CSV input whose one study "sx" has ``first`` (unreadable by default:
    excluded by its pixels, not by the input), then ``rest`` (im000 and im001); all PA,
    with REPORTS[0]."""
    path = make_input(folder, n=3)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["image_path", "report", "study_id", "patient_id", "view"])
        w.writeheader()
        for p in (first, *rest):
            w.writerow({"image_path": p, "report": REPORTS[0], "study_id": "sx", "patient_id": "px", "view": "PA"})
    return path


def absent_negatives_by_image(dataset: Path) -> dict[str, list[str]]:
    """Image id -> the sorted lesion types of its negatives of :data:`ABSENT_OF_REPORT_0`."""
    from cxrils.dataset import read_records

    df = read_records(dataset)
    neg = df[(df["polarity"] == "negative") & df["lesion_type"].isin(ABSENT_OF_REPORT_0)]
    return {i: sorted(g["lesion_type"]) for i, g in neg.groupby("image_id")}


def snapshot(dataset: Path) -> dict:
    """Everything a dataset holds that must not depend on how it was produced:
    the records (sorted), the image and grounding file bytes, and the summary counts."""
    from cxrils.dataset import read_records

    df = read_records(dataset)
    records = sorted(
        json.dumps({k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in r.items()}, sort_keys=True, default=str)
        for r in df.to_dict("records")
    )
    images = {p.name: p.read_bytes() for p in sorted((dataset / "images").glob("*.png"))}
    grounding = {p.name: p.read_bytes() for p in sorted((dataset / "grounding").glob("*.json"))}
    summary = json.loads((dataset / "generate_summary.json").read_text())
    for key in ("dataset", "runner", "input"):
        summary.pop(key)
    files = sorted(str(p.relative_to(dataset)) for p in dataset.rglob("*") if p.is_file())
    return {"records": records, "images": images, "grounding": grounding, "summary": summary, "files": files}
