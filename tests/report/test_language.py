"""Reports not in English are excluded, never structured into "no finding" (new-user trial)."""

from __future__ import annotations

import csv

import pytest

from cxrils.config import Config
from cxrils.report import structure_report, structure_reports
from cxrils.report.language import function_words, not_english_reason, words

FOREIGN = [
    # German, Spanish, French, Italian, Portuguese, Dutch reports naming a pneumonia and an effusion
    "BEFUND: Infiltrat im rechten Unterlappen. Grosser Pleuraerguss links. BEURTEILUNG: Pneumonie rechts basal.",
    "Hallazgos: consolidación en lóbulo inferior derecho, neumonía derecha, derrame pleural.",
    "Opacité du lobe inférieur droit, épanchement pleural gauche, pneumonie probable.",
    "Addensamento del lobo inferiore destro, versamento pleurico sinistro: polmonite.",
    "Consolidação do lobo inferior direito com derrame pleural esquerdo.",
    "Infiltraat in de rechter onderkwab met pleuravocht links, geen pneumothorax.",
    # short ones (new-user trial): one or two side words, no English function word
    "Erguss rechts. Infiltrat im linken Unterlappen.",
    "BEFUND: Infiltrat im linken Unterlappen, passend zu Pneumonie.",
]
ENGLISH = [
    "No acute cardiopulmonary process.",
    "Bronchial wall thickening. Small peripheral patchy infiltrates.",
    "Right lower lobe pneumonia. Small left pleural effusion.",
    "Patient transferred from Hospital de Clinicas with bilateral opacities in the lungs.",
    # ICU reports full of abbreviations that are also foreign words (review of the first list)
    "ET tube in satisfactory position. ET and NG tubes in place.",
    "ET tube 3 cm above carina. NG tube in stomach. Recommend ET tube retraction.",
    "65 y/o male, est. 2 cm non-specific nodule, IM injection site, sono follow-up.",
    # no English function word at all, and at most one foreign word: names, abbreviations
    "Bilateral effusions. Cardiomegaly. Right basilar atelectasis.",
    "Status post DES placement. Lungs clear. Heart size normal.",
    "Right nipple shadow en face. Lungs otherwise clear.",
    "Outside film, Hospital del Mar. Bilateral effusions. Cardiomegaly.",
    "Dr. Wie notified. Lungs clear. No effusion.",
    "Portable AP chest. Lungs clear. Dr. Zu paged.",
]


def test_function_words_counts_by_hand():
    # "rechten", "links", "rechts" are German side words ("im" is left out: also IM, intramuscular)
    assert function_words(FOREIGN[0]) == (0, 3, 12)
    # the, with, the are English function words ("in" is left out of both lists: also German/Dutch)
    assert function_words("The heart with the lungs in view") == (3, 0, 7)


@pytest.mark.parametrize("text", FOREIGN)
def test_a_report_in_another_language_is_excluded_with_the_reason(text):
    reason = not_english_reason(text, 4, 2)
    assert reason is not None and reason.startswith("not English")
    (rep,) = structure_reports([("s1", text)], Config())
    assert rep.excluded == reason and rep.findings == [] and rep.section_used is None
    # the one-report entry points exclude it too
    one = structure_report("s1", text)
    assert one.excluded == reason and one.findings == [] and one.section_used is None


@pytest.mark.parametrize("text", ENGLISH)
def test_english_reports_are_kept_even_short_or_with_a_foreign_place_name(text):
    assert not_english_reason(text, 4, 2) is None
    (rep,) = structure_reports([("s1", text)], Config())
    assert rep.excluded is None


def test_the_check_can_be_turned_off():
    assert not_english_reason(FOREIGN[0], 0, 2) is None


def test_no_public_english_report_or_case_note_is_excluded(shared_data):
    csv.field_size_limit(10**8)
    texts = []
    with open(shared_data / "iu_xray" / "nlmcxr_reports_all.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            texts += [row[k] or "" for k in ("indication", "comparison", "findings", "impression")]
    with open(shared_data / "covid_ieee8023" / "metadata.csv", encoding="utf-8") as fh:
        texts += [row["clinical_notes"] or "" for row in csv.DictReader(fh)]
    assert len(texts) > 15000
    cfg = Config().report
    flagged = [t for t in texts if not_english_reason(t, cfg.language_min_words, cfg.language_min_foreign)]
    assert flagged == []


def test_words_are_letter_runs_of_any_alphabet():
    # digits, underscores and punctuation split words; accented and Cyrillic letters do not
    assert words("Erguss re. 2x_3 Lunge; légère опacity") == ["Erguss", "re", "x", "Lunge", "légère", "опacity"]
    assert words(None) == [] and words("") == []
