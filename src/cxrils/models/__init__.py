"""ILS models: the shared API, the light CPU model and ROSALIA.

>>> from cxrils.models import Segmenter
>>> seg = Segmenter.from_pretrained("runs/light")                          # doctest: +SKIP
>>> pred = seg.predict(x, "Segment the effusion in the left lung base.")    # doctest: +SKIP
>>> pred.mask, pred.answer, pred.presence_score                            # doctest: +SKIP
"""

from cxrils.models.base import MODEL_TYPES, ModelLoadError, Prediction, Segmenter, default_model_dir

__all__ = ["MODEL_TYPES", "ModelLoadError", "Prediction", "Segmenter", "default_model_dir"]
