from cxrils.report.sections import normalize_section_name, select_iu_section, select_section, split_sections

MIMIC = """                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)

 INDICATION:  Cough.

 COMPARISON:  None.

 FINDINGS:
 
 Small left pleural effusion.  No pneumothorax.
 
 IMPRESSION:
 
 Small left effusion.
"""


def test_findings_preferred_and_whitespace_collapsed():
    c = select_section(MIMIC)
    assert c.name == "findings"
    assert c.text == "Small left pleural effusion. No pneumothorax."
    assert c.excluded is None


def test_impression_when_findings_missing_or_empty():
    c = select_section("INDICATION: cough\n\nFINDINGS:\n\nIMPRESSION: No effusion.")
    assert (c.name, c.text) == ("impression", "No effusion.")


def test_last_paragraph_when_no_findings_or_impression():
    text = "INDICATION: fever\n\nCOMPARISON: none\n\nThe lungs are clear.\nNo effusion."
    c = select_section(text)
    assert (c.name, c.text) == ("last_paragraph", "The lungs are clear. No effusion.")


def test_plain_text_without_headers_uses_last_paragraph():
    c = select_section("First paragraph.\n\nSecond paragraph with edema.")
    assert (c.name, c.text) == ("last_paragraph", "Second paragraph with edema.")


def test_headers_only_excluded_with_reason():
    c = select_section("INDICATION:\n\nCOMPARISON: \n")
    assert c.name is None and c.text == ""
    assert "no findings" in c.excluded


def test_unknown_headers_are_text_for_the_last_paragraph():
    c = select_section("PC: Fever. BG: Asthma. Patchy opacities bilaterally.")
    assert (c.name, c.text) == ("last_paragraph", "PC: Fever. BG: Asthma. Patchy opacities bilaterally.")


def test_empty_text_excluded():
    assert select_section("   ").excluded == "empty report text"


def test_misspelled_and_indented_headers():
    assert normalize_section_name("IMPRESSON") == "impression"
    assert normalize_section_name("FINDNGS") == "findings"
    c = select_section("   IMPRESSON:  Mild edema.")
    assert (c.name, c.text) == ("impression", "Mild edema.")


def test_findings_and_impression_combined_header():
    secs = split_sections("FINDINGS AND IMPRESSION: Cardiomegaly.")
    assert {"findings", "impression"} <= set(secs.names)


def test_wet_read_kept_apart_and_never_chosen():
    text = "WET READ: possible pneumonia\n\nINDICATION: x\n\nIMPRESSION: No pneumonia."
    c = select_section(text)
    assert (c.name, c.text) == ("impression", "No pneumonia.")
    assert "wet_read" in c.flags and c.wet_read == "possible pneumonia"
    only_wet = select_section("WET READ: possible pneumonia")
    assert only_wet.excluded and "wet-read" in only_wet.excluded and only_wet.text == ""


def test_addendum_kept_and_flagged():
    c = select_section("FINDINGS: Small effusion.\n\nADDENDUM: Findings discussed with Dr. ___.")
    assert c.name == "findings" and c.text == "Small effusion."
    assert "addendum" in c.flags and c.addendum.startswith("Findings discussed")


def test_nonempty_text_never_yields_empty_section():
    for text in ["Lungs clear.", "FINDINGS:\n\nLungs clear.", "blah\n\nIMPRESSION:", "IMPRESSION: ok"]:
        c = select_section(text)
        assert c.excluded or c.text.strip()


def test_iu_format():
    assert select_iu_section("Heart enlarged.", "Cardiomegaly.").name == "findings"
    assert select_iu_section(None, "Cardiomegaly.").name == "impression"
    assert select_iu_section("", "").excluded
