"""``cxrils.registry.Registry``: names -> lazily imported classes, one error type per
registry; and the registries of the stages built on it."""

from __future__ import annotations

import sys
import types

import pytest

from cxrils.config import Config
from cxrils.registry import Registry


class DemoError(RuntimeError):
    pass


@pytest.fixture
def demo_module(monkeypatch):
    """A module ``cxrils_demo_backends`` with a backend that loads files and one that loads none."""
    mod = types.ModuleType("cxrils_demo_backends")

    class WithFiles:
        def __init__(self, path: str) -> None:
            self.path = path

        @classmethod
        def from_config(cls, cfg):
            return cls(cfg.backends.onnx_detector)

        @classmethod
        def weight_files(cls, cfg):
            return [cfg.backends.onnx_detector, "/shipped.bin"]

    class NoFiles:
        @classmethod
        def from_config(cls, cfg):
            return cls()

    mod.WithFiles, mod.NoFiles = WithFiles, NoFiles
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def demo() -> Registry[object]:
    return Registry(
        "demo backend",
        {
            "files": "cxrils_demo_backends:WithFiles",
            "none": "cxrils_demo_backends:NoFiles",
            "absent": "cxrils_no_such_module:Thing",
            "typo": "cxrils_demo_backends:NoSuchClass",
        },
        DemoError,
    )


def test_unknown_name_raises_the_registry_error_with_the_choices():
    with pytest.raises(
        DemoError,
        match=r"^unknown demo backend 'nope'; "
        r"choose one of \['absent', 'files', 'none', 'typo'\]$",
    ):
        demo().resolve("nope")
    with pytest.raises(DemoError, match="unknown demo backend"):
        demo().build("nope", Config())
    with pytest.raises(DemoError, match="unknown demo backend"):
        demo().weight_files("nope", Config())


def test_entries_are_imported_only_when_chosen(demo_module):
    reg = demo()  # "absent" names a module that does not exist: registering it imports nothing
    assert reg.names() == ["absent", "files", "none", "typo"] and "absent" in reg and "nope" not in reg
    assert reg.target("absent") == "cxrils_no_such_module:Thing"
    assert reg.resolve("none") is demo_module.NoFiles
    with pytest.raises(DemoError, match=r"^demo backend 'absent' is not available: .*cxrils_no_such_module"):
        reg.resolve("absent")
    with pytest.raises(DemoError, match=r"^demo backend 'typo' is not available: .*NoSuchClass"):
        reg.resolve("typo")


def test_build_and_weight_files_come_from_the_class(demo_module):
    cfg = Config()
    cfg.backends.onnx_detector = "/w/model.onnx"
    built = demo().build("files", cfg)
    assert isinstance(built, demo_module.WithFiles) and built.path == "/w/model.onnx"
    assert demo().weight_files("files", cfg) == ["/w/model.onnx", "/shipped.bin"]
    assert demo().weight_files("none", cfg) == []  # a class without weight_files loads no file


def test_register_checks_the_target():
    reg = demo()
    reg.register("later", "cxrils_demo_backends:NoFiles")
    assert "later" in reg.names()
    for bad in ("cxrils_demo_backends.NoFiles", ":NoFiles", "cxrils_demo_backends:"):
        with pytest.raises(ValueError, match="is not of the form package.module:Class"):
            reg.register("bad", bad)


def _stage_registries():
    from cxrils.report import LOCATION_MAPPERS, STRUCTURERS
    from cxrils.vision.anatomy.base import BACKENDS as ANATOMY
    from cxrils.vision.anomaly.base import BACKENDS as ANOMALY
    from cxrils.vision.detection.base import BACKENDS as DETECTOR

    return {
        "anatomy": ANATOMY,
        "anomaly": ANOMALY,
        "detector": DETECTOR,
        "structurer": STRUCTURERS,
        "mapper": LOCATION_MAPPERS,
    }


def test_the_stage_registries_hold_the_documented_backends():
    names = {stage: reg.names() for stage, reg in _stage_registries().items()}
    assert names == {
        "anatomy": ["builtin", "cxas", "hybridgnet"],
        "anomaly": ["atlas", "builtin", "radedit"],
        "detector": ["builtin", "onnx"],
        "structurer": ["llm", "rules"],
        "mapper": ["lexicon", "llm"],
    }


@pytest.mark.parametrize("stage", ["anatomy", "anomaly", "detector", "structurer", "mapper"])
def test_every_stage_backend_resolves_to_a_class_with_from_config(stage):
    reg = _stage_registries()[stage]
    for name in reg.names():
        cls = reg.resolve(name)
        assert isinstance(cls, type) and callable(getattr(cls, "from_config", None)), (stage, name)
        if stage in ("anatomy", "anomaly", "detector"):  # every image backend loads weights
            assert callable(getattr(cls, "weight_files", None)), (stage, name)


def test_errors_users_see_are_unchanged():
    from cxrils.models.base import ModelLoadError, resolve_model_class
    from cxrils.report import get_location_mapper, get_structurer
    from cxrils.vision.anatomy import AnatomyBackendError, get_segmenter
    from cxrils.vision.anomaly import AnomalyBackendError, get_anomaly_mapper
    from cxrils.vision.detection import DetectorBackendError, get_detector

    cfg = Config()
    cases = [
        (
            lambda: get_segmenter("x", cfg),
            AnatomyBackendError,
            "unknown anatomy backend 'x'; choose one of ['builtin', 'cxas', 'hybridgnet']",
        ),
        (
            lambda: get_anomaly_mapper("x", cfg),
            AnomalyBackendError,
            "unknown anomaly backend 'x'; choose one of ['atlas', 'builtin', 'radedit']",
        ),
        (
            lambda: get_detector("x", cfg),
            DetectorBackendError,
            "unknown detector backend 'x'; choose one of ['builtin', 'onnx']",
        ),
        (lambda: get_structurer("x", cfg), ValueError, "unknown report structurer 'x'; choose one of ['llm', 'rules']"),
        (
            lambda: get_location_mapper("x", cfg),
            ValueError,
            "unknown location mapper 'x'; choose one of ['lexicon', 'llm']",
        ),
        (
            lambda: resolve_model_class("x"),
            ModelLoadError,
            "unknown model_type 'x'; choose one of ['light', 'rosalia']",
        ),
    ]
    for call, error, message in cases:
        with pytest.raises(error) as info:
            call()
        assert str(info.value) == message
