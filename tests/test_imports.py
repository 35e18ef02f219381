"""Imports flow one way (docs/architecture.md): no cycles, no lower stage importing a
higher one, counting imports inside functions too (a function-level import that only
hides a cycle does not break it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cxrils

SRC = Path(cxrils.__file__).resolve().parents[1]  # the cxrils under test

#: Layers, lowest first: a module may import its own layer and those below it.
#: Foundation modules (config, vocab, types, masks, templates, fsutil, overlay, extras, registry, progress) come first.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cxrils", "config", "vocab", "types", "masks", "templates", "fsutil", "overlay", "extras", "registry", "progress"),
    ("io", "report"),
    ("sources",),
    ("vision",),
    ("grounding",),
    ("instructions",),
    ("dataset",),
    ("models",),
    ("evaluation",),
    ("serve", "pipeline", "review", "training"),
    ("cli", "__main__"),
)

#: Known exceptions: batch prediction calling the evaluation (``cxrils predict`` scores
#: what it predicts; docs/architecture.md).
ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        ("cxrils.models.predict", "cxrils.evaluation"),
    }
)


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "cxrils").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the cxrils modules it imports anywhere in its body."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {resolve(a.name) for a in node.names if a.name.startswith("cxrils")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                if base.startswith("cxrils"):
                    targets |= {resolve(f"{base}.{a.name}") for a in node.names}
        edges[name] = {t for t in targets if t and t != name}
    return edges


def _layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else parts[0]
    for rank, names in enumerate(LAYERS):
        if top in names:
            return rank
    raise AssertionError(f"{module}: not in any layer of LAYERS")


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return _edges(_modules())


def test_the_graph_sees_function_level_imports(graph) -> None:
    # The parser must see imports inside functions (the pipeline's lazy stage imports).
    assert "cxrils.grounding" in graph["cxrils.pipeline.stages"]


def test_no_lower_stage_imports_a_higher_one(graph) -> None:
    bad = sorted(
        (a, b) for a, targets in graph.items() for b in targets if _layer(b) > _layer(a) and (a, b) not in ALLOWED
    )
    assert not bad, f"imports against the stage order: {bad}"


def test_no_import_cycles(graph) -> None:
    kept = {a: {b for b in targets if (a, b) not in ALLOWED} for a, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in kept.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(kept):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


#: Packages on an inference path (generation, prediction, serving): none of their modules
#: may import cxrils.training, even through other modules or inside a function. The
#: commands (``train-*`` included) live above them all, in cxrils.cli.
INFERENCE_PACKAGES: tuple[str, ...] = (
    "cxrils.pipeline",
    "cxrils.vision",
    "cxrils.models",
    "cxrils.serve",
    "cxrils.grounding",
)


def test_no_inference_module_reaches_training_code(graph) -> None:
    starts = sorted(m for m in graph if m.startswith(INFERENCE_PACKAGES))
    assert "cxrils.vision.anomaly.builtin" in starts and "cxrils.models.light.segmenter" in starts
    bad = []
    for start in starts:
        seen, todo, parent = {start}, [start], {start: ""}
        while todo:
            v = todo.pop()
            for w in graph.get(v, ()):
                if w not in seen:
                    seen.add(w)
                    parent[w] = v
                    todo.append(w)
        hits = sorted(m for m in seen if m == "cxrils.training" or m.startswith("cxrils.training."))
        if hits:
            chain, v = [], hits[0]
            while v:
                chain.append(v)
                v = parent[v]
            bad.append(" -> ".join(reversed(chain)))
    assert not bad, "inference modules that reach training code:\n" + "\n".join(bad)


def test_the_training_scan_can_fail() -> None:
    # The check above sees an import of training code when one is there: the train-anatomy
    # command (CLI layer, so allowed) does import it.
    edges = _edges(_modules())
    assert any(t.startswith("cxrils.training") for t in edges["cxrils.cli.anatomy"])
