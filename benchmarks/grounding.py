"""Grounding benchmarks (issue 5). Prints:

1. Algorithm 1 time per finding at 512 and 1024 px (one real COVID-19 image with
   its hand-drawn lung mask, builtin anomaly map and builtin boxes; a synthetic
   phantom when ../shared/data is absent).
2. The builtin anomaly mapper's Spearman correlation between the anomalous lung
   fraction |A ∩ lungs| / |lungs| (A = x_ano >= tau_ano) and the mean expert
   geographic-extent and opacity scores of the 93 COVID-19 images of
   ../shared/data/covid_ieee8023 (lung masks: masks_lung_v7labs, else masks_lung_vae).
3. The builtin detector against the 12 NIH ChestX-ray14 expert boxes: best IoU per
   image and the hit rate at IoU >= 0.3. The lungs come from the builtin anatomy
   backend (``--anatomy``), or from a classical lung-field estimate
   (:func:`lung_field_estimate`) with ``--anatomy ''`` or when the backend is missing.

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/grounding.py [--data ../shared/data]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import cv2
import numpy as np
from PIL import Image
from scipy import ndimage as ndi
from scipy.stats import spearmanr

from cxrils.config import Config
from cxrils.grounding import algorithm1
from cxrils.vision.anomaly import get_anomaly_mapper
from cxrils.vision.detection import get_detector

ROOT = Path(__file__).resolve().parents[1]


def read_gray(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"))


def split_lungs(lungs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Patient-right lung = the part left of the image's vertical midline of the lungs."""
    cols = np.flatnonzero(lungs.any(axis=0))
    mid = (cols[0] + cols[-1]) / 2 if cols.size else lungs.shape[1] / 2
    right = lungs.copy()
    right[:, int(mid):] = False
    return right, lungs & ~right


def lung_field_estimate(x: np.ndarray) -> np.ndarray:
    """Classical lung fields for images without an anatomy model (benchmark only).

    Otsu threshold of the blurred, equalised image inside the central box (columns
    8-92%, rows 5-95%); an opening (disk, 2% of the size) cuts thin links to the dark
    background; the two largest components whose centroids lie in the middle 80% of
    columns are kept, holes filled, and the opening undone by a dilation. Crude: it
    misses lung hidden by dense opacity.
    """
    h, w = x.shape
    xs = cv2.GaussianBlur(cv2.equalizeHist(x), (0, 0), max(x.shape) / 150)
    _, dark = cv2.threshold(xs, 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    box = np.zeros(x.shape, bool)
    box[int(0.05 * h):int(0.95 * h), int(0.08 * w):int(0.92 * w)] = True
    r = max(2, int(0.02 * max(h, w)))
    disk = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    core = cv2.morphologyEx(((dark > 0) & box).astype(np.uint8), cv2.MORPH_OPEN, disk) > 0
    labels, n = ndi.label(core)
    comps = []
    for i, sl in enumerate(ndi.find_objects(labels), start=1):
        cy, cx = ndi.center_of_mass(labels[sl] == i)
        cx += sl[1].start
        if 0.1 * w < cx < 0.9 * w and (labels[sl] == i).sum() > 0.01 * h * w:
            comps.append((int((labels[sl] == i).sum()), i))
    lungs = np.isin(labels, [i for _, i in sorted(comps, reverse=True)[:2]])
    lungs = ndi.binary_fill_holes(lungs)
    return (cv2.dilate(lungs.astype(np.uint8), disk) > 0) & (dark > 0) | lungs


def covid_items(data: Path):
    import pandas as pd

    d = data / "covid_ieee8023"
    for row in pd.read_csv(d / "severity_scores.csv").itertuples():
        name = Path(row.filename).with_suffix(".png").name
        image = d / "images" / name
        mask = next((d / m / name for m in ("masks_lung_v7labs", "masks_lung_vae") if (d / m / name).exists()), None)
        if image.exists() and mask is not None:
            yield read_gray(image), read_gray(mask) > 127, row.geographic_mean, row.opacity_mean


def bench_covid(data: Path, cfg: Config, anatomy: str | None) -> None:
    mapper = get_anomaly_mapper("builtin", cfg)
    segmenter = None
    if anatomy:
        try:
            from cxrils.vision.anatomy import get_segmenter

            segmenter = get_segmenter(anatomy, cfg)
        except Exception as err:  # missing stage, package or weights
            print(f"anatomy backend {anatomy!r} unavailable ({err})")
    sources = {"expert/VAE lung masks": None}
    if segmenter is not None:
        sources[f"anatomy backend {anatomy} (lungs + heart edit region)"] = segmenter
    for label, seg in sources.items():
        frac, geo, opa = [], [], []
        for x, lungs, g, o in covid_items(data):
            edit = lungs
            if seg is not None:
                masks = seg.segment(x)
                lungs = masks.union(("right lung", "left lung"))
                edit = lungs | masks["heart"]
            try:
                a = mapper.map(x, edit, lungs=lungs).anomaly_set(cfg.grounding.tau_ano)
                frac.append((a & lungs).sum() / max(1, lungs.sum()))
            except ValueError:  # failed lung mask: counted as no anomaly
                frac.append(0.0)
            geo.append(g)
            opa.append(o)
        rg, ro = spearmanr(frac, geo)[0], spearmanr(frac, opa)[0]
        print(f"COVID-19 severity, {label} (n={len(frac)}, tau_ano={cfg.grounding.tau_ano}): Spearman of "
              f"anomalous lung fraction vs geographic extent {rg:.3f}, vs opacity {ro:.3f} (target >= 0.6)")


def bench_nih(data: Path, cfg: Config, anatomy: str | None) -> None:
    import pandas as pd

    d = data / "nih_bbox"
    mapper, detector = get_anomaly_mapper("builtin", cfg), get_detector("builtin", cfg)
    if anatomy:
        try:
            from cxrils.vision.anatomy import get_segmenter

            segmenter = get_segmenter(anatomy, cfg)
        except Exception as err:  # missing stage, package or weights: say so and fall back
            print(f"anatomy backend {anatomy!r} unavailable ({err}); using the classical lung-field estimate")
            anatomy = None
    print(f"NIH lungs from: {'anatomy backend ' + anatomy if anatomy else 'classical lung-field estimate'}")
    best = []
    for row in pd.read_csv(d / "bboxes.csv").itertuples():
        x = read_gray(d / "images" / row.image_id)
        lungs = segmenter.segment(x).union(("right lung", "left lung")) if anatomy else lung_field_estimate(x)
        ref = np.zeros(x.shape, bool)
        ref[int(round(row.y)):int(round(row.y + row.h)), int(round(row.x)):int(round(row.x + row.w))] = True
        ious, note = [0.0], ""
        try:
            boxes = detector.detect(x, anomaly=mapper.map(x, lungs))
            ious += [(b.to_mask(x.shape) & ref).sum() / (b.to_mask(x.shape) | ref).sum() for b in boxes]
            note = f"{len(boxes)} boxes"
        except ValueError as err:  # e.g. a failed lung estimate: counted as a miss
            note = f"no boxes: {err}"
        best.append((row.finding, max(ious)))
        print(f"  {row.image_id} {row.finding:12s} best IoU {max(ious):.3f} ({note})")
    for label, sel in (("all", [v for _, v in best]), ("without cardiomegaly", [v for f, v in best if f != "Cardiomegaly"])):
        v = np.array(sel)
        print(f"NIH expert boxes, {label} (n={len(v)}): mean best IoU {v.mean():.3f}, "
              f"hit rate at IoU >= 0.3: {(v >= 0.3).mean():.3f} ({int((v >= 0.3).sum())}/{len(v)})")


def timing_scene(data: Path | None, cfg: Config):
    if data is not None:
        x, lungs, _, _ = next(covid_items(data))
    else:
        x = np.full((512, 512), 170, np.uint8)
        lungs = np.zeros(x.shape, bool)
        lungs[60:450, 50:230] = lungs[60:450, 282:462] = True
        x[lungs] = 60
        x[300:420, 80:200] = 150
    return x, lungs


def bench_timing(data: Path | None, cfg: Config, repeats: int = 5) -> None:
    x0, lungs0 = timing_scene(data, cfg)
    for size in (512, 1024):
        scale = size / max(x0.shape)
        shape = (int(round(x0.shape[1] * scale)), int(round(x0.shape[0] * scale)))
        x = cv2.resize(x0, shape, interpolation=cv2.INTER_LINEAR)
        lungs = cv2.resize(lungs0.astype(np.uint8), shape, interpolation=cv2.INTER_NEAREST) > 0
        right, left = split_lungs(lungs)
        anomaly = get_anomaly_mapper("builtin", cfg).map(x, lungs)
        boxes = get_detector("builtin", cfg).detect(x, anomaly=anomaly)
        a = anomaly.anomaly_set(cfg.grounding.tau_ano)
        t0 = time.perf_counter()
        for _ in range(repeats):
            algorithm1(x, a, right, right, left, boxes, "pneumonia", cfg.grounding)
        dt = (time.perf_counter() - t0) / repeats
        print(f"Algorithm 1 at {x.shape[1]}x{x.shape[0]} px with {len(boxes)} boxes: {dt * 1000:.1f} ms per finding")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data")
    ap.add_argument("--anatomy", default="builtin",
                    help="anatomy backend for the NIH lungs; '' = the classical lung-field estimate "
                         "(also used when the backend is unavailable)")
    args = ap.parse_args()
    cfg = Config()
    data = args.data if args.data.is_dir() else None
    bench_timing(data, cfg)
    if data is None:
        print(f"{args.data} not found: COVID-19 and NIH benchmarks skipped")
        return
    bench_covid(data, cfg, args.anatomy)
    bench_nih(data, cfg, args.anatomy)


if __name__ == "__main__":
    main()
