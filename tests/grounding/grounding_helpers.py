"""Hand-built anatomy for grounding tests: a 100 x 100 image whose patient-right
lung is columns 0-49 (image left) and patient-left lung columns 50-99."""

from __future__ import annotations

import numpy as np

from cxrils.types import AnatomyMasks, AnomalyResult, Finding
from cxrils.vocab import LEFT_ZONES, RIGHT_ZONES

H = W = 100
ZONE_ROWS = ((0, 15), (15, 40), (40, 70), (70, 100))  # apical, upper, mid, base


def rect(r0: int, r1: int, c0: int, c1: int, shape=(H, W)) -> np.ndarray:
    m = np.zeros(shape, dtype=bool)
    m[r0:r1, c0:c1] = True
    return m


def anatomy(heart: bool = True) -> AnatomyMasks:
    """Lungs of 5000 px each; zones by rows; lobes by rows; heart in the middle rows
    60-90, columns 40-60 (it overlaps the lungs' medial parts, as CXAS masks may)."""
    masks = {"right lung": rect(0, H, 0, 50), "left lung": rect(0, H, 50, W)}
    for zones, (c0, c1) in ((RIGHT_ZONES, (0, 50)), (LEFT_ZONES, (50, W))):
        for zone, (r0, r1) in zip(zones, ZONE_ROWS):
            masks[zone] = rect(r0, r1, c0, c1)
    masks["lung upper lobe right"] = rect(0, 40, 0, 50)
    masks["lung middle lobe right"] = rect(40, 70, 0, 50)
    masks["lung lower lobe right"] = rect(70, H, 0, 50)
    masks["lung upper lobe left"] = rect(0, 60, 50, W)
    masks["lung lower lobe left"] = rect(60, H, 50, W)
    masks["heart"] = rect(60, 90, 40, 60) if heart else np.zeros((H, W), dtype=bool)
    return AnatomyMasks(masks=masks, shape=(H, W), backend="hand")


def anomaly(x_ano: np.ndarray, x: np.ndarray | None = None) -> AnomalyResult:
    x = np.full((H, W), 60, np.uint8) if x is None else x
    x_hat = np.clip(x.astype(int) - np.rint(x_ano * 255).astype(int), 0, 255).astype(np.uint8)
    return AnomalyResult(x_hat=x_hat, x_ano=x_ano.astype(np.float32), edit_region=np.ones((H, W), bool), backend="hand")


def finding(entity: str, lesion_type: str | None, labels: list[str], presence: str = "positive") -> Finding:
    return Finding(
        entity=entity,
        sentence_index=1,
        presence=presence,
        certainty="definitive",
        locations=list(labels),
        labels=list(labels),
        lesion_type=lesion_type,
    )
