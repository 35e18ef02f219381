"""The stage provider protocol states the stages' real signatures (mypy checks
``BuiltinStages`` against it; these checks run without mypy)."""

from __future__ import annotations

import inspect

from cxrils.grounding import ground_study
from cxrils.pipeline.stages import BuiltinStages, StageProvider


def _params(fn) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"]


def test_ground_study_has_the_keywords_of_the_grounding_stage():
    expected = _params(ground_study)
    assert all(kind is inspect.Parameter.KEYWORD_ONLY for _, kind, _ in expected)
    assert _params(StageProvider.ground_study) == expected
    assert _params(BuiltinStages.ground_study) == expected


def test_make_methods_return_the_stage_protocols():
    import typing

    from cxrils.config import Config
    from cxrils.vision.anatomy import AnatomySegmenter
    from cxrils.vision.anomaly import AnomalyMapper
    from cxrils.vision.detection import LesionDetector

    protocols = {"make_anatomy": AnatomySegmenter, "make_anomaly": AnomalyMapper, "make_detector": LesionDetector}
    names = {cls.__name__: cls for cls in protocols.values()}  # imported by stages.py for type checking only
    for provider in (StageProvider, BuiltinStages):
        for method, protocol in protocols.items():
            assert typing.get_type_hints(getattr(provider, method), localns=names)["return"] is protocol
    cfg = Config()
    stages = BuiltinStages()
    for method, protocol in protocols.items():
        assert isinstance(getattr(stages, method)(cfg), protocol), method
