"""The backend registry shared by the vision stages (anatomy, anomaly, detection)."""

from __future__ import annotations

import importlib
from typing import Any

from cxrils.config import Config


def build_backend(backends: dict[str, str], name: str, stage: str, error: type[Exception], cfg: Config) -> Any:
    """Import ``backends[name]`` ("module:Class") and return ``Class.from_config(cfg)``.

    The backend module is imported only when chosen, so optional dependencies
    (diffusers, onnxruntime, cxas...) are needed only by the backends that use them.

    Raises
    ------
    error
        If ``name`` is not a key of ``backends``; the backend's own ``from_config``
        raises ``error`` too when its package or weights are missing.
    """
    if name not in backends:
        raise error(f"unknown {stage} backend {name!r}; choose one of {sorted(backends)}")
    module, cls = backends[name].split(":")
    return getattr(importlib.import_module(module), cls).from_config(cfg)
