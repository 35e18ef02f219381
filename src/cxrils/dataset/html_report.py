"""A self-contained HTML page to judge a generated dataset by eye (``cxrils stats --html``).

One file, no external resource (images inlined as ``data:`` URIs): the image counts,
the pairs per split in the layout of the paper's Tables 10-12, the Figure-4-style chart
(:func:`cxrils.dataset.stats.plot_counts`) and a gallery of sampled records for every
lesion type x polarity: the image with the record's reference mask tinted (R/L side
markers: the patient's right on the image's left), the instruction and the answer.
Sampling is seeded, so the same dataset gives the same page.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from cxrils import __version__, vocab
from cxrils.dataset.stats import (
    INSTRUCTION_TYPE_NAMES,
    TOTAL,
    count_table,
    image_counts,
    no_template_note,
    plot_counts,
)
from cxrils.dataset.torch_dataset import ILSDataset
from cxrils.dataset.writer import read_manifest
from cxrils.fsutil import atomic_write_text
from cxrils.masks import decode_rle
from cxrils.overlay import mask_overlay

#: Longer side, in pixels, of the gallery's thumbnails (ours).
THUMB_SIDE = 320
#: JPEG quality of the thumbnails (ours: small files, masks still clearly visible).
THUMB_QUALITY = 85

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111; background: #fafafa; }
h1 { margin-bottom: 0.2rem; } .meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5rem 0 1.2rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; } tr.total td { font-weight: bold; }
.chart { max-width: 100%; border: 1px solid #ccc; background: #fff; }
.cell { display: flex; flex-wrap: wrap; gap: 0.8rem; margin-bottom: 1rem; }
figure { margin: 0; width: 330px; background: #fff; border: 1px solid #ccc; padding: 5px; }
figure img { width: 100%; display: block; }
figcaption { font-size: 0.8rem; line-height: 1.3; } .q { font-weight: 600; } .a { color: #0a5; }
.none { color: #777; font-style: italic; }
"""


def _b64(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def thumbnail(x: np.ndarray, mask: np.ndarray, side: int = THUMB_SIDE) -> bytes:
    """JPEG bytes of ``x`` uint8 (H, W) shrunk to at most ``side`` px (aspect kept),
    with ``mask`` bool (H, W) tinted (a pixel is set when at least half of it is
    covered), a legend and the R/L side markers."""
    import cv2
    from PIL import Image

    h, w = x.shape
    scale = min(1.0, side / max(h, w))
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    small = cv2.resize(x, size, interpolation=cv2.INTER_AREA) if scale < 1 else x
    m = cv2.resize(mask.astype(np.float32), size, interpolation=cv2.INTER_AREA) >= 0.5 if scale < 1 else mask
    rgb = mask_overlay(small, m, label="reference mask" if m.any() else None)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=THUMB_QUALITY)
    return buf.getvalue()


def _count_html(table: Any, split: str) -> str:
    head = "".join(f"<th colspan=2>{INSTRUCTION_TYPE_NAMES[it]}</th>" for it in vocab.INSTRUCTION_TYPES)
    sub = "<th>positive</th><th>negative</th>" * len(vocab.INSTRUCTION_TYPES)
    rows = []
    for lesion in table.index:
        cells = "".join(
            f"<td>{int(table.loc[lesion, (it, p)])}</td>" for it in vocab.INSTRUCTION_TYPES for p in vocab.POLARITIES
        )
        tot = "".join(f"<td>{int(table.loc[lesion, (TOTAL, k)])}</td>" for k in ("positive", "negative", TOTAL))
        rows.append(f"<tr class='{'total' if lesion == TOTAL else ''}'><td>{html.escape(lesion)}</td>{cells}{tot}</tr>")
    note = no_template_note(table)
    return (
        f"<h3>{html.escape(split)}</h3><table><tr><th rowspan=2>lesion type</th>{head}"
        f"<th colspan=3>all</th></tr><tr>{sub}<th>positive</th><th>negative</th><th>pairs</th></tr>"
        + "".join(rows)
        + "</table>"
        + (f"<p>{html.escape(note)}.</p>" if note else "")
    )


def _images_html(counts: dict[str, Any]) -> str:
    rows = []
    if counts["processed"] is not None:
        rows.append(("processed (done + excluded)", counts["processed"]))
    rows += [
        ("with records", counts["with_records"]),
        ("done, no records", len(counts["without_records"])),
        ("excluded", counts["excluded"]),
    ]
    rows += [(f"excluded: {reason}", n) for reason, n in counts["excluded_by_reason"].items()]
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in rows)
    return f"<table><tr><th>images</th><th>count</th></tr>{body}</table>"


def sample_records(records: Any, per_cell: int, seed: int = 0) -> dict[tuple[str, str], list[int]]:
    """Row positions of up to ``per_cell`` template records per (lesion type, polarity),
    drawn without replacement with a seeded generator (paraphrases left out)."""
    rng = np.random.default_rng(seed)
    out: dict[tuple[str, str], list[int]] = {}
    templ = records["paraphrase_of"].fillna("") == "" if "paraphrase_of" in records else None
    for lesion in vocab.LESION_TYPES:
        for pol in vocab.POLARITIES:
            sel = (records["lesion_type"] == lesion) & (records["polarity"] == pol)
            if templ is not None:
                sel &= templ
            idx = np.flatnonzero(sel.to_numpy())
            k = min(per_cell, len(idx))
            out[(lesion, pol)] = sorted(int(i) for i in rng.choice(idx, size=k, replace=False)) if k else []
    return out


def _figure(ds: ILSDataset, i: int) -> str:
    r = ds.records.iloc[i]
    x = ds.load_image(i)
    mask = decode_rle(r["mask"])
    src = _b64(thumbnail(x, mask), "image/jpeg")
    alt = f"{r['image_id']}: {r['instruction']}"
    area = int(mask.sum())
    facts = [
        r["record_id"],
        r["split"],
        INSTRUCTION_TYPE_NAMES.get(r["instruction_type"], r["instruction_type"]),
        r["certainty"],
        f"mask {area} px" if area else "empty mask",
    ]
    return (
        f"<figure><img src='{src}' alt='{html.escape(alt, quote=True)}'>"
        f"<figcaption><span class='q'>{html.escape(str(r['instruction']))}</span><br>"
        f"<span class='a'>{html.escape(str(r['answer']))}</span><br>"
        + " · ".join(html.escape(str(f)) for f in facts if f)
        + "</figcaption></figure>"
    )


def write_html_report(
    dataset_dir: str | Path, out_path: str | Path, *, per_cell: int = 2, seed: int = 0, split: str | None = None
) -> Path:
    """Write the HTML report of a finalized dataset (see the module docstring).

    Parameters
    ----------
    dataset_dir : path
        A finalized cxrils dataset.
    out_path : path
        The ``.html`` file (written atomically; its folder is created).
    per_cell : int
        Gallery records per lesion type and polarity.
    seed : int
        Seed of the sampling.
    split : str, optional
        Only the records of this split (a name of :data:`cxrils.vocab.SPLITS`) in the
        tables, the chart and the gallery; None for every split. The images table
        always covers the whole dataset.

    Returns
    -------
    Path
        ``out_path``.

    Raises
    ------
    cxrils.dataset.DatasetError
        If the dataset is not finalized or an image of a sampled record is missing.
    """
    root = Path(dataset_dir)
    manifest = read_manifest(root)
    ds = ILSDataset(root, split, augment=None, size=None)
    records = ds.records
    which = f"split {split}: " if split else ""
    parts = [
        f"<h1>cxrils dataset: {html.escape(root.name)}{html.escape(f' ({split} split)' if split else '')}</h1>",
        f"<p class='meta'>{html.escape(which)}{len(records)} records · written "
        f"{_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} by cxrils {__version__} (cxrils stats --html). "
        "Masks are the dataset's own (automatically generated); no expert reviewed them.</p>",
        "<h2>Images (whole dataset)</h2>" if split else "<h2>Images</h2>",
        _images_html(image_counts(root, manifest)),
        "<h2>Instruction-answer pairs per split (layout of paper Tables 10-12)</h2>",
    ]
    for name in vocab.SPLITS:
        if (records["split"] == name).any():
            parts.append(_count_html(count_table(records, name), name))
    if len(records):
        with tempfile.TemporaryDirectory(prefix="cxrils-report-") as tmp:
            chart = plot_counts(records, Path(tmp) / "chart.png").read_bytes()
        parts.append(
            "<h2>Pairs per lesion type (Figure 4 style)</h2>"
            f"<img class='chart' src='{_b64(chart, 'image/png')}' alt='bar chart of pairs per lesion type'>"
        )
    parts.append(
        f"<h2>Sampled records ({per_cell} per lesion type and polarity, seed {seed})</h2>"
        "<p>Each image shows the record's reference mask in red; R and L mark the patient's right "
        "and left (standard frontal display: the patient's right is on the image's left).</p>"
    )
    for (lesion, pol), rows in sample_records(records, per_cell, seed).items():
        parts.append(f"<h3>{html.escape(lesion)}, {pol}</h3>")
        if not rows:
            parts.append("<p class='none'>no record of this kind</p>")
            continue
        parts.append("<div class='cell'>" + "".join(_figure(ds, i) for i in rows) + "</div>")
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>cxrils dataset {html.escape(root.name)}</title><style>{_CSS}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, page)
    return out
