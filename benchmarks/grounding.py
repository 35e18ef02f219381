"""Grounding benchmarks (issue 5). Prints:

1. Algorithm 1 time per finding at 512 and 1024 px (one real COVID-19 image with
   its hand-drawn lung mask, builtin anomaly map and builtin boxes; a synthetic
   phantom when ../shared/data is absent).
2. Per anomaly backend (``builtin``: the learned lesion map; ``atlas``: the healthy-lung
   atlas), the Spearman correlation between the anomalous lung fraction
   |A ∩ lungs| / |lungs| (A = x_ano >= tau_ano) and the mean expert geographic-extent and
   opacity scores of the 93 COVID-19 images of ../shared/data/covid_ieee8023 (lung masks:
   masks_lung_v7labs, else masks_lung_vae; then the builtin anatomy's lungs + heart).
3. The builtin detector against the 12 NIH ChestX-ray14 expert boxes: best box IoU per
   image and the hit rate at IoU >= 0.3 (box against box). The detector reads only the
   image.

Run: ``PYTHONPATH=src nice -n 10 python -m benchmarks.grounding [--data ../shared/data]
[--publish grounding]``.
"""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
from PIL import Image
from scipy.stats import spearmanr

from benchmarks.results import benchmark_parser, publish_if_asked
from cxrils.config import Config
from cxrils.evaluation import mask_iou
from cxrils.grounding import algorithm1
from cxrils.vision.anomaly import get_anomaly_mapper
from cxrils.vision.detection import get_detector


def read_gray(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"))


def split_lungs(lungs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Patient-right lung = the part left of the image's vertical midline of the lungs."""
    cols = np.flatnonzero(lungs.any(axis=0))
    mid = (cols[0] + cols[-1]) / 2 if cols.size else lungs.shape[1] / 2
    right = lungs.copy()
    right[:, int(mid) :] = False
    return right, lungs & ~right


def covid_items(data: Path):
    from cxrils.sources.covid19 import read_covid19_images, read_covid19_severity

    images = {r.image_id: r for r in read_covid19_images(data)}
    for row in read_covid19_severity(data):
        r = images.get(row.image_id) if row.image_id else None
        mask = None if r is None else r.v7labs_mask_path or r.vae_mask_path
        if r is not None and r.image_path.exists() and mask is not None:
            yield read_gray(r.image_path), read_gray(mask) > 127, row.geographic_mean, row.opacity_mean


def bench_covid(data: Path, cfg: Config, anatomy: str | None, backend: str, out: list[str]) -> None:
    mapper = get_anomaly_mapper(backend, cfg)
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
        out.append(
            f"- COVID-19 severity, anomaly backend {backend}, {label} (n={len(frac)}, tau_ano="
            f"{cfg.grounding.tau_ano}): Spearman of the anomalous lung fraction vs geographic extent "
            f"{rg:.3f}, vs opacity {ro:.3f}"
        )


def bench_nih(data: Path, cfg: Config, out: list[str]) -> None:
    from cxrils.sources.nih import read_nih_boxes

    detector = get_detector("builtin", cfg)
    best = []
    for row in read_nih_boxes(data):
        x = read_gray(row.image_path)
        ref = np.zeros(x.shape, bool)
        ref[int(round(row.y)) : int(round(row.y + row.h)), int(round(row.x)) : int(round(row.x + row.w))] = True
        boxes = detector.detect(x)
        ious = [0.0] + [mask_iou(b.to_mask(x.shape), ref) for b in boxes]
        best.append((row.finding, max(ious)))
        out.append(f"  - {row.image_path.name} {row.finding}: best box IoU {max(ious):.3f} ({len(boxes)} boxes)")
    for label, sel in (
        ("all", [v for _, v in best]),
        ("without cardiomegaly", [v for f, v in best if f != "Cardiomegaly"]),
    ):
        v = np.array(sel)
        out.append(
            f"- NIH expert boxes, {label} (n={len(v)}): mean best IoU {v.mean():.3f}, "
            f"hit rate at IoU >= 0.3: {int((v >= 0.3).sum())}/{len(v)}"
        )


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


def bench_timing(data: Path | None, cfg: Config, out: list[str], repeats: int = 5) -> None:
    x0, lungs0 = timing_scene(data, cfg)
    mapper, detector = get_anomaly_mapper("builtin", cfg), get_detector("builtin", cfg)  # loaded once
    for size in (512, 1024):
        scale = size / max(x0.shape)
        shape = (int(round(x0.shape[1] * scale)), int(round(x0.shape[0] * scale)))
        x = cv2.resize(x0, shape, interpolation=cv2.INTER_LINEAR)
        lungs = cv2.resize(lungs0.astype(np.uint8), shape, interpolation=cv2.INTER_NEAREST) > 0
        right, left = split_lungs(lungs)
        anomaly = mapper.map(x, lungs, lungs=lungs)
        boxes = detector.detect(x)
        a = anomaly.anomaly_set(cfg.grounding.tau_ano)
        t0 = time.perf_counter()
        for _ in range(repeats):
            algorithm1(x, a, right, right, left, boxes, "pneumonia", cfg.grounding)
        dt = (time.perf_counter() - t0) / repeats
        out.append(
            f"- Algorithm 1 at {x.shape[1]}x{x.shape[0]} px with {len(boxes)} boxes: {dt * 1000:.1f} ms per finding"
        )


def main() -> None:
    ap = benchmark_parser(__doc__.split("\n")[0], data=True, page="grounding")
    ap.add_argument("--anatomy", default="builtin", help="anatomy backend for the severity benchmark's lungs")
    args = ap.parse_args()
    cfg = Config()
    data = args.data if args.data.is_dir() else None
    out: list[str] = []
    bench_timing(data, cfg, out)
    if data is None:
        out.append(f"{args.data} not found: COVID-19 and NIH benchmarks skipped")
    else:
        for backend in ("builtin", "atlas"):
            bench_covid(data, cfg, args.anatomy, backend, out)
        bench_nih(data, cfg, out)
    text = "\n".join(out)
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
