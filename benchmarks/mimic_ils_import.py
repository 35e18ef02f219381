"""Speed of ``cxrils import-mimic-ils`` and ``cxrils export --format mimic-ils`` on
release-sized synthetic data.

MIMIC-CXR-Ext-ILS cannot be shipped (credentialed access), so this writes a folder in
its layout with MIMIC-CXR-JPG-sized images (3056 x 2544 and 2544 x 3056 gray JPEGs,
noise), one 0/255 lesion mask PNG per image at the image size, and the release's pair
mix (on average 5.6 pairs per image: 1.1M pairs / 192K images, about one positive in
eight, paper section 3.2). It measures samples per second importing with
``max_side`` 1024 (the default) with 1 and 2 worker processes, and exporting, and
derives the hours for the release's 192K images from the 1-worker rate (an estimate:
real JPEGs decode at a different speed than noise, and disks differ).

Run: ``python -m benchmarks.mimic_ils_import [--images 16] [--publish mimic_ils_import]``.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.results import benchmark_parser, publish_if_asked

RELEASE_IMAGES = 192_000  # paper section 3.2: 1.1M pairs from 192K images


def make_release(root: Path, n: int) -> tuple[Path, Path, Path, int]:
    from cxrils import templates as T

    rng = np.random.default_rng(0)
    files, masks = root / "files", root / "lesion_mask"
    data: dict = {"train": {}, "val": {}, "test": {}}
    pairs = 0
    for i in range(n):
        shape = (3056, 2544) if i % 2 == 0 else (2544, 3056)
        rel = f"p1{i % 10}/p1{i:07d}/s5{i:07d}/{i:08x}-synthetic.jpg"
        (files / rel).parent.mkdir(parents=True, exist_ok=True)
        x = np.clip(rng.normal(110, 30, (shape[0] // 8, shape[1] // 8)), 0, 255).astype(np.uint8)
        Image.fromarray(x).resize(shape[::-1], Image.BILINEAR).save(files / rel, quality=90)
        m = np.zeros(shape, np.uint8)
        m[shape[0] // 2 : shape[0] // 2 + 400, shape[1] // 4 : shape[1] // 4 + 500] = 255
        mrel = f"{i:08x}_effusion.png"
        masks.mkdir(parents=True, exist_ok=True)
        Image.fromarray(m).save(masks / mrel)
        pos = [
            {
                "instruction": T.render_instruction("basic", "effusion", ["right lung base"]),
                "answer": T.render_answer("basic", "positive"),
                "target": "effusion",
                "seg_mask_path": mrel,
            }
        ]
        neg = [
            {
                "instruction": T.render_instruction("global", t),
                "answer": T.render_answer("global", "negative", t),
                "target": t,
            }
            for t in ("edema", "pneumonia", "cardiomegaly", "consolidation")
        ]
        if i % 3 == 0:
            neg.append(
                {
                    "instruction": T.render_instruction("basic", "effusion", ["left lung base"]),
                    "answer": T.render_answer("basic", "negative", "effusion", ["left lung base"]),
                    "target": "effusion",
                }
            )
        split = "train" if i % 8 else ("val" if i % 16 else "test")
        data[split][f"{i:08x}-synthetic"] = {
            "image_path": rel,
            "instruction_answer_pairs": {"positive_pairs": pos, "negative_pairs": neg},
        }
        pairs += len(pos) + len(neg)
    js = root / "mimic_ils_instruction_answer.json"
    js.write_text(json.dumps(data))
    return js, files, masks, pairs


def main() -> None:
    from cxrils.dataset.mimic_ils import export_mimic_ils, import_mimic_ils

    ap = benchmark_parser(__doc__.splitlines()[0], page="mimic_ils_import")
    ap.add_argument("--images", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        js, files, masks, pairs = make_release(root / "release", args.images)
        rows = []
        rate1 = None
        for workers in (1, 2):
            t0 = time.perf_counter()
            rep = import_mimic_ils(js, files, masks, root / f"ds{workers}", workers=workers, progress=False)
            dt = time.perf_counter() - t0
            rate = rep["samples_imported_this_run"] / dt
            rate1 = rate1 or rate
            rows.append(
                f"| import, max_side 1024, {workers} worker{'s' if workers > 1 else ''} | "
                f"{args.images} images, {pairs} pairs | {dt:.1f} | {rate:.2f} images/s |"
            )
        t0 = time.perf_counter()
        export_mimic_ils(root / "ds1", root / "export")
        dt = time.perf_counter() - t0
        rows.append(
            f"| export --format mimic-ils | {args.images} images | {dt:.1f} | {args.images / dt:.2f} images/s |"
        )
        size = sum(p.stat().st_size for p in (root / "ds1").rglob("*") if p.is_file()) / args.images
    text = "\n".join(
        [
            "### Measured here (CPU; synthetic release-layout data, MIMIC-CXR-JPG-sized JPEGs)",
            "",
            "| step | data | seconds | rate |",
            "|---|---|---:|---:|",
            *rows,
            "",
            f"Imported dataset size: {size / 1e6:.2f} MB per image (1024 px PNG + records).",
            "",
            "### Derived for the release (192K images, from the 1-worker rate above)",
            "",
            "| step | estimate |",
            "|---|---|",
            f"| import, 1 worker | {RELEASE_IMAGES / rate1 / 3600:.1f} hours |",
            f"| import, 16 workers (if it scales linearly; disk-bound in practice) | {RELEASE_IMAGES / rate1 / 16 / 3600:.1f} hours |",
            f"| dataset size | {RELEASE_IMAGES * size / 1e9:.0f} GB |",
        ]
    )
    print(text)
    publish_if_asked(args, text)


if __name__ == "__main__":
    main()
