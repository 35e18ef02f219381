"""The one backend registry: a name -> ``"module:Class"`` table per kind of backend.

Every model-backed stage (anatomy, anomaly, detection, report structuring, location
mapping) and the ILS model types keep one :class:`Registry`. An entry names its class
by import path, and the module is imported only when that name is chosen, so a
backend's optional dependencies (diffusers, onnxruntime, cxas...) are needed only by
the runs that use it.

What a registered class provides:

- ``from_config(cfg: Config)`` (classmethod), used by :meth:`Registry.build`;
- optionally ``weight_files(cfg: Config) -> list[str]`` (classmethod): the weight files
  or folders the backend loads with ``cfg`` (set paths only), hashed into a dataset's
  provenance (:meth:`Registry.weight_files`). It must not import the optional
  dependency; a class without it loads no file.

A backend module itself imports no optional package at module level (they are imported
inside ``from_config`` or the constructor), so resolving a name is cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from cxrils.config import Config

T = TypeVar("T")


class Registry(Generic[T]):
    """Backends of one kind, by name, imported lazily.

    Parameters
    ----------
    kind : str
        What the names name, as messages say it ("anatomy backend", "report
        structurer", "model_type").
    entries : mapping of str to str
        Name -> ``"package.module:Class"``.
    error : exception class
        Raised (with a one-line message) for an unknown name or a class that cannot be
        imported; the stage's own error type (``AnatomyBackendError``...).

    Examples
    --------
    >>> reg = Registry("demo backend", {"dict": "builtins:dict"}, ValueError)
    >>> reg.names(), reg.resolve("dict") is dict
    (['dict'], True)
    >>> reg.resolve("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown demo backend 'nope'; choose one of ['dict']
    """

    def __init__(self, kind: str, entries: Mapping[str, str], error: Callable[[str], Exception]) -> None:
        self.kind = kind
        self.error = error
        self._entries: dict[str, str] = {}
        for name, target in entries.items():
            self.register(name, target)

    def register(self, name: str, target: str) -> None:
        """Add (or replace) the entry ``name`` -> ``target`` ("package.module:Class").

        Raises
        ------
        ValueError
            If ``target`` is not of that form.
        """
        module, sep, attr = target.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"{self.kind} {name!r}: {target!r} is not of the form package.module:Class")
        self._entries[name] = target

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def target(self, name: str) -> str:
        """The ``"package.module:Class"`` of ``name``, without importing it.

        Raises
        ------
        error
            If ``name`` is not registered.
        """
        if name not in self._entries:
            raise self.error(f"unknown {self.kind} {name!r}; choose one of {self.names()}")
        return self._entries[name]

    def resolve(self, name: str) -> Any:
        """Import and return the class registered as ``name``.

        Raises
        ------
        error
            If ``name`` is not registered, or its module or class cannot be imported
            ("{kind} {name!r} is not available: ...").
        """
        module, _, attr = self.target(name).partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise self.error(f"{self.kind} {name!r} is not available: {err}") from err

    def build(self, name: str, cfg: Config) -> T:
        """``resolve(name).from_config(cfg)``: the backend, its model loaded.

        Raises
        ------
        error
            As :meth:`resolve`; the class's ``from_config`` raises the stage's error
            too when its package or weights are missing.
        """
        built: T = self.resolve(name).from_config(cfg)
        return built

    def weight_files(self, name: str, cfg: Config) -> list[str]:
        """The weight files (or folders) backend ``name`` loads with ``cfg``: its
        class's ``weight_files(cfg)``, [] for a class without one. Imports the
        backend's module, never its optional dependencies.

        Raises
        ------
        error
            As :meth:`resolve`.
        """
        listing = getattr(self.resolve(name), "weight_files", None)
        return [str(p) for p in listing(cfg)] if callable(listing) else []
