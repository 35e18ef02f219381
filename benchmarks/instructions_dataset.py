"""Throughput of instruction generation and dataset writing on synthetic groundings.

Prints studies per second for ``generate_records`` and for ``DatasetWriter``
(commit + finalize), records per study and bytes per record on disk, at 512 x 512
(the size of the shared sample images). Run:
``PYTHONPATH=src nice -n 10 python -m benchmarks.instructions_dataset [N] [--publish instructions_dataset]``;
``--publish instructions_dataset`` writes ``docs/results/instructions_dataset.md``
(``benchmarks/results.py``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results import benchmark_parser, publish_if_asked
from cxrils.config import Config
from cxrils.dataset import DatasetWriter
from cxrils.instructions import generate_records
from cxrils.types import Finding, GroundedFinding, StudyGrounding

H = W = 512


def study(i: int) -> StudyGrounding:
    """A tentative right-upper-zone pneumonia, bibasilar atelectasis grounded right only,
    a negated effusion and cardiomegaly, with masks at 512 x 512."""

    def box(r0, r1, c0, c1):
        m = np.zeros((H, W), dtype=bool)
        m[r0:r1, c0:c1] = True
        return m

    def gf(entity, certainty, reported, grounded, mask, presence="positive"):
        f = Finding(
            entity=entity,
            sentence_index=1,
            presence=presence,
            certainty=certainty,
            labels=list(reported),
            lesion_type=entity,
            sentence=f"{entity}.",
        )
        return GroundedFinding(
            finding=f, lesion_type=entity, reported=list(reported), grounded=list(grounded), empty=[], mask=mask
        )

    heart = box(240, 400, 200, 360)
    return StudyGrounding(
        study_id=f"s{i}",
        image_id=f"im{i:06d}",
        shape=(H, W),
        ctr=0.55,
        heart_mask=heart,
        empty_locations=["left apical zone lung", "left upper zone lung", "left mid zone lung"],
        findings=[
            gf("pneumonia", "tentative", ["right upper zone lung"], ["right upper zone lung"], box(100, 180, 60, 160)),
            gf(
                "atelectasis",
                "definitive",
                ["right lung base", "left lung base"],
                ["right lung base"],
                box(360, 440, 50, 180),
            ),
            gf("effusion", "definitive", [], [], None, presence="negative"),
            gf("cardiomegaly", "definitive", ["heart"], ["heart"], heart),
        ],
    )


def main() -> None:
    ap = benchmark_parser(__doc__.splitlines()[0], page="instructions_dataset")
    ap.add_argument("n", nargs="?", type=int, default=200, metavar="N", help="synthetic studies (default 200)")
    args = ap.parse_args()
    n = args.n
    cfg = Config()
    groundings = [study(i) for i in range(n)]
    t0 = time.perf_counter()
    recs = [
        generate_records(g, split="train", patient_id=f"p{i}", image_path="", cfg=cfg) for i, g in enumerate(groundings)
    ]
    t_gen = time.perf_counter() - t0
    x = (np.random.default_rng(0).random((H, W)) * 255).astype(np.uint8)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        w = DatasetWriter(d, {"benchmark": True})
        for g, r in zip(groundings, recs):
            w.commit_study(g.image_id, x, r)
        t_commit = time.perf_counter() - t0
        t0 = time.perf_counter()
        w.finalize()
        t_final = time.perf_counter() - t0
        shard_bytes = sum(p.stat().st_size for p in Path(d, "records").glob("*.parquet"))
    n_rec = sum(len(r) for r in recs)
    print(f"studies: {n}, records: {n_rec} ({n_rec / n:.1f} per study), image {H}x{W}")
    print(f"generate_records: {n / t_gen:.1f} studies/s")
    print(f"commit_study (image PNG + part): {n / t_commit:.1f} studies/s")
    print(f"finalize: {t_final:.2f} s; records shards {shard_bytes / n_rec:.0f} bytes/record")
    publish_if_asked(
        args,
        "\n".join(
            [
                f"{n} synthetic studies ({H}x{W}; a tentative pneumonia, bibasilar atelectasis grounded on the right, "
                f"a negated effusion, cardiomegaly), {n_rec} records ({n_rec / n:.1f} per study), one process.",
                "",
                "| step | speed |",
                "|---|---:|",
                f"| `generate_records` | {n / t_gen:.1f} studies/s |",
                f"| `DatasetWriter.commit_study` (image PNG + part file) | {n / t_commit:.1f} studies/s |",
                f"| `DatasetWriter.finalize` | {t_final:.2f} s |",
                f"| records shards on disk | {shard_bytes / n_rec:.0f} bytes/record |",
            ]
        ),
    )


if __name__ == "__main__":
    main()
