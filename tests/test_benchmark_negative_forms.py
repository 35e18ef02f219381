"""benchmarks/negative_forms.py: the forms of negative records, restated from Table 2's templates."""

from __future__ import annotations

from benchmarks.negative_forms import (
    ONE_PLACE_OPACITY,
    form_of,
    opacity_table,
    sheet_forms,
    sheet_opacity_pairing,
    table,
)


def test_forms_of_table2_negatives():
    assert form_of("global", "effusion", []) == "global, lung types"
    assert form_of("global", "cardiomegaly", []) == "global, cardiomegaly"
    assert form_of("basic", "effusion", ["right lung", "left lung"]) == "basic, both lungs"
    assert form_of("basic", "effusion", ["left lung", "right lung"]) == "basic, both lungs"
    assert form_of("basic", "edema", ["left lung"]) == "basic, one lung"
    assert form_of("basic", "edema", ["left lung base"]) == "basic, zones"
    assert form_of("lesion_inference", "opacity", ["left lung base"]) == "lesion inference"


def test_sheet_rows_as_the_authors_write_them(tmp_path):
    sheet = tmp_path / "absence.csv"
    sheet.write_text(
        "filename,presence_label,sample_key,dicom_id,target,location,question,quality,comment\n"
        "a1,absence,s1,d1,effusion,lung,Segment the effusion.,,\n"
        "a2,absence,s1,d1,consolidation,left lung and right lung,Segment the consolidation in the left lung and "
        "right lung.,,\n"
        "a3,absence,s1,d1,opacity,left lung base,Segment the opacity in the left lung base and predict its type.,,\n"
        "a4,absence,s1,d1,cardiomegaly,heart,Segment the cardiomegaly.,,\n"
        "a5,absence,s1,d1,edema,right lung,Segment the edema in the right lung.,,\n"
        "a6,absence,s2,d2,opacity,right lung,Segment the opacity in the right lung.,,\n"
        "a7,absence,s3,d3,opacity,right upper zone lung,Segment the opacity in the right upper zone lung.,,\n"
        "a8,absence,s4,d4,opacity,lung,Segment the opacity.,,\n",
        encoding="utf-8",
    )
    counts = sheet_forms(sheet)
    assert counts == {
        "global, lung types": 2,
        "basic, both lungs": 1,
        "lesion inference": 1,
        "global, cardiomegaly": 1,
        "basic, one lung": 2,
        "basic, zones": 1,
        # the opacity negatives at one place: a6, a7 basic, a3 lesion inference (a8 is global)
        ONE_PLACE_OPACITY[0]: 2,
        ONE_PLACE_OPACITY[1]: 1,
    }
    text = table({"sheet": counts})
    assert "| basic, zones | 1 (12.5 %) |" in text and "| all negatives | 8 |" in text
    assert "| sheet | 3 | 1 (33.3 %) |" in opacity_table({"sheet": counts})


def test_sheet_opacity_pairing_counts_studies_forms_and_shared_places(tmp_path):
    sheet = tmp_path / "absence.csv"
    sheet.write_text(
        "filename,presence_label,sample_key,dicom_id,target,location,question,quality,comment\n"
        # s1: lesion inference beside an edema negative at the same place
        "a1,absence,s1,d1,opacity,left lung base,Segment the opacity in the left lung base and predict its type.,,\n"
        "a2,absence,s1,d1,edema,left lung base,Segment the edema in the left lung base.,,\n"
        # s2: basic opacity, the pneumonia negative elsewhere
        "a3,absence,s2,d2,opacity,right lung,Segment the opacity in the right lung.,,\n"
        "a4,absence,s2,d2,pneumonia,left lung,Segment the pneumonia in the left lung.,,\n"
        # s3: both forms in one study
        "a5,absence,s3,d3,opacity,right lung,Segment the opacity in the right lung.,,\n"
        "a6,absence,s3,d3,opacity,left lung,Segment the opacity in the left lung and predict its type.,,\n",
        encoding="utf-8",
    )
    assert sheet_opacity_pairing(sheet) == (
        "Released sheet: 3 studies have an opacity negative, 1 of them in both forms. Sharing study and place "
        "with a pneumonia, atelectasis or edema negative: lesion-inference negatives 1 of 2, other opacity "
        "negatives 0 of 2."
    )
