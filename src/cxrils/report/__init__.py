"""Report understanding: sections, structured findings, location mapping.

The text side of the pipeline (paper section 3.1 step 1, Appendix A.1-A.2):

- :func:`select_section` picks findings, else impression, else the last
  paragraph, else excludes the study with a reason;
- a :class:`ReportStructurer` turns the section into six-element tuples
  (:class:`cxrils.types.Finding`): ``rules`` (default, CPU) or ``llm``;
- a :class:`~cxrils.report.locations.LocationMapper` maps each raw location to
  lung-region labels in CXAS spelling (or a broad category): ``lexicon``
  (default) or ``llm``.

Sides are the PATIENT's ("right lung" is on the image's left on a frontal view).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Protocol

from cxrils.config import ReportConfig
from cxrils.registry import Registry
from cxrils.report.locations import LocationMapper
from cxrils.report.sections import SectionChoice, select_iu_section, select_section
from cxrils.types import Finding, StructuredReport

__all__ = [
    "ReportStructurer",
    "LocationMapper",
    "STRUCTURERS",
    "LOCATION_MAPPERS",
    "get_structurer",
    "get_location_mapper",
    "structure_report",
    "structure_reports",
    "structure_section",
    "select_section",
    "select_iu_section",
    "SectionChoice",
]


class ReportStructurer(Protocol):
    """Turns one section text into findings (labels empty; mapping is separate)."""

    name: str

    def structure(self, text: str) -> list[Finding]:
        """The findings of one section text, in reading order (``labels`` empty)."""
        ...

    def structure_many(self, texts: Iterable[str]) -> list[list[Finding]]:
        """:meth:`structure` of each text, in order (a backend may batch them)."""
        ...


#: Report structurers by name (:class:`cxrils.registry.Registry`); ``from_config(cfg)``
#: builds one, ``weight_files(cfg)`` lists the model it loads (``llm``).
STRUCTURERS: Registry[ReportStructurer] = Registry(
    "report structurer",
    {
        "rules": "cxrils.report.rules:RulesStructurer",
        "llm": "cxrils.report.llm:LLMStructurer",
    },
    ValueError,
)

#: Location mappers by name, as :data:`STRUCTURERS`.
LOCATION_MAPPERS: Registry[LocationMapper] = Registry(
    "location mapper",
    {
        "lexicon": "cxrils.report.locations:LexiconLocationMapper",
        "llm": "cxrils.report.llm:LLMLocationMapper",
    },
    ValueError,
)


def get_structurer(name: str | None = None, cfg=None) -> ReportStructurer:
    """The report structurer called ``name`` ("rules" | "llm"); None takes
    ``cfg.backends.report_structurer``.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    from cxrils.config import Config

    cfg = cfg or Config()
    return STRUCTURERS.build(name or cfg.backends.report_structurer, cfg)


def get_location_mapper(name: str | None = None, cfg=None) -> LocationMapper:
    """The location mapper called ``name`` ("lexicon" | "llm"); None takes
    ``cfg.backends.location_mapper``.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    from cxrils.config import Config

    cfg = cfg or Config()
    return LOCATION_MAPPERS.build(name or cfg.backends.location_mapper, cfg)


@lru_cache(maxsize=1)
def _default_structurer() -> ReportStructurer:
    """One shared ``rules`` structurer with the default configuration."""
    return get_structurer("rules")


def _map_labels(findings: list[Finding], mapper: LocationMapper) -> list[Finding]:
    for f in findings:
        labels: list[str] = []
        for phrase in f.locations:
            labels += [lab for lab in mapper.map(phrase) if lab not in labels]
        f.labels = labels
    return findings


def _report(study_id: str, choice: SectionChoice, findings: list[Finding]) -> StructuredReport:
    return StructuredReport(
        study_id=str(study_id),
        section_used=choice.name,
        section_text=choice.text,
        findings=findings,
        excluded=choice.excluded,
        flags=list(choice.flags),
    )


def english_only(choice: SectionChoice, report_cfg=None) -> SectionChoice:
    """``choice``, or the same choice excluded with the reason when its text is not English
    (:func:`cxrils.report.language.not_english_reason` with ``report_cfg``'s
    ``language_min_words`` / ``language_min_foreign``; default :class:`~cxrils.config.ReportConfig`),
    so that a foreign report is never structured into "no finding"."""
    from cxrils.config import Config
    from cxrils.report.language import not_english_reason

    if choice.excluded:
        return choice
    rc = report_cfg or Config().report
    foreign = not_english_reason(choice.text, rc.language_min_words, rc.language_min_foreign)
    return dataclasses.replace(choice, name=None, text="", excluded=foreign) if foreign else choice


def structure_section(
    study_id: str, choice: SectionChoice, *, structurer=None, mapper=None, report_cfg=None
) -> StructuredReport:
    """Structure an already chosen section (e.g. from the IU format); a section that is not
    English is excluded with the reason (:func:`english_only`)."""
    structurer = structurer or _default_structurer()
    mapper = mapper or get_location_mapper("lexicon")
    choice = english_only(choice, report_cfg)
    findings = [] if choice.excluded else structurer.structure(choice.text)
    return _report(study_id, choice, _map_labels(findings, mapper))


def structure_report(study_id: str, text: str, *, structurer=None, mapper=None) -> StructuredReport:
    """Structure one raw report: section choice, findings, location labels.

    Parameters
    ----------
    study_id : str
    text : str
        The raw report (MIMIC-CXR layout with ``NAME:`` headers, or plain text); a
        chosen section that is not English is excluded with the reason.
    structurer : ReportStructurer, optional
        Default: a shared ``rules`` structurer, built on first use.
    mapper : LocationMapper, optional
        Default: ``lexicon``.

    Returns
    -------
    StructuredReport
        ``excluded`` holds the reason when no section could be chosen.
    """
    structurer = structurer or _default_structurer()
    # the structurer's own line rule, so that section_text and the findings agree
    max_chars = getattr(structurer, "line_statement_max_chars", ReportConfig.line_statement_max_chars)
    return structure_section(study_id, select_section(text, max_chars), structurer=structurer, mapper=mapper)


def structure_reports(
    items: Iterable[tuple[str, str | SectionChoice]], cfg=None, *, structurer=None, mapper=None, batch_size: int = 256
) -> Iterator[StructuredReport]:
    """Structure many ``(study_id, raw_text)`` pairs, in input order, lazily; an item
    may give a :class:`~cxrils.report.sections.SectionChoice` instead of the text (one
    excluded already keeps its reason).

    Backends come from ``cfg.backends`` unless given; texts are processed in
    batches (concurrent requests for llm). A chosen section that is not English
    (:func:`cxrils.report.language.not_english_reason`, ``cfg.report``) is excluded
    with the reason, never structured into "no finding".
    """
    from cxrils.config import Config

    structurer = structurer or get_structurer(None, cfg)
    mapper = mapper or get_location_mapper(None, cfg)
    rc = (cfg or Config()).report
    batch: list[tuple[str, SectionChoice]] = []

    def choose(item: str | SectionChoice) -> SectionChoice:
        chosen = item if isinstance(item, SectionChoice) else select_section(item, rc.line_statement_max_chars)
        return english_only(chosen, rc)

    def flush() -> Iterator[StructuredReport]:
        todo = [c.text for _, c in batch if not c.excluded]
        results = iter(structurer.structure_many(todo))
        for sid, choice in batch:
            findings = [] if choice.excluded else next(results)
            yield _report(sid, choice, _map_labels(findings, mapper))
        batch.clear()

    for sid, item in items:
        batch.append((sid, choose(item)))
        if len(batch) >= batch_size:
            yield from flush()
    if batch:
        yield from flush()
