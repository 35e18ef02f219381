"""The llm backend's plumbing with a scripted chat client (no model)."""

import json
import threading

import pytest

pytest.importorskip("jsonschema")

from cxrils.config import Config  # noqa: E402
from cxrils.report.llm import (  # noqa: E402
    Completion,
    LLMLocationMapper,
    LLMOutputError,
    LLMStructurer,
    LLMTruncatedError,
    OpenAIChatClient,
    extract_json,
)

GOOD = {
    "findings": [
        {
            "entity": "adenopathy",
            "sentence_index": 1,
            "presence": "positive",
            "certainty": "definitive",
            "location": ["hilar"],
            "predicted_lesion_type": None,
        },
        {
            "entity": "opacity",
            "sentence_index": 2,
            "presence": "positive",
            "certainty": "tentative",
            "location": ["left base"],
            "predicted_lesion_type": "pneumonia",
        },
    ]
}


class Scripted:
    """Answers from a list, records the prompts it got."""

    model = "scripted"

    def __init__(self, answers):
        self.answers = list(answers)
        self.prompts = []
        self.lock = threading.Lock()

    def complete(self, messages, *, max_tokens):
        with self.lock:
            self.prompts.append(messages[-1]["content"])
            a = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return a if isinstance(a, Completion) else Completion(a, "stop")


def test_prompt_holds_the_paper_rules_and_the_report():
    c = Scripted([json.dumps(GOOD)])
    LLMStructurer(c).structure("Hilar adenopathy. Left base opacity, possibly pneumonia.")
    p = c.prompts[0]
    assert "Hilar adenopathy. Left base opacity" in p
    for rule in [
        "No change in pneumothorax",
        "has\n   been resolved",
        "hilar adenopathy",
        "devices",
        '"clear"',
        "cannot exclude pneumothorax",
    ]:
        assert rule in p


def test_parses_fenced_answer_with_prose():
    c = Scripted(["Here you go:\n```json\n" + json.dumps(GOOD) + "\n```\nLet me know!"])
    fs = LLMStructurer(c).structure("x")
    assert [(f.entity, f.locations, f.lesion_type, f.predicted_lesion_type) for f in fs] == [
        ("adenopathy", ["hilar"], None, None),
        ("opacity", ["left base"], "opacity", "pneumonia"),
    ]


def test_none_answer_is_no_findings():
    assert LLMStructurer(Scripted(["None"])).structure("Lungs clear.") == []


def test_truncated_answer_is_its_own_error_and_not_retried():
    c = Scripted([Completion('{"findings": [{"entity": "opa', "length")])
    with pytest.raises(LLMTruncatedError) as err:
        LLMStructurer(c, max_retries=3).structure("x")
    assert err.value.text.startswith('{"findings"')
    assert len(c.prompts) == 1


def test_invalid_answers_are_retried_then_fail():
    bad = {"findings": [{**GOOD["findings"][0], "presence": "maybe"}]}
    c = Scripted([json.dumps(bad)])
    with pytest.raises(LLMOutputError, match="schema"):
        LLMStructurer(c, max_retries=2).structure("x")
    assert len(c.prompts) == 3
    c2 = Scripted(["no json here", json.dumps(GOOD)])
    assert len(LLMStructurer(c2, max_retries=1).structure("x")) == 2


def test_cache_by_report_hash(tmp_path):
    c = Scripted([json.dumps(GOOD)])
    s = LLMStructurer(c, cache_dir=tmp_path)
    s.structure("same"), s.structure("same")
    assert len(c.prompts) == 1
    s2 = LLMStructurer(Scripted(["not used"]), cache_dir=tmp_path)
    s2.client.model = "scripted"
    assert len(s2.structure("same")) == 2  # from the cache file
    s.structure("other")
    assert len(c.prompts) == 2


def test_concurrent_requests_keep_order():
    class Echo(Scripted):
        def complete(self, messages, *, max_tokens):
            text = messages[-1]["content"].rsplit("Report:\n", 1)[1]
            return Completion(json.dumps({"findings": [{**GOOD["findings"][0], "entity": text}]}), "stop")

    s = LLMStructurer(Echo([""]), concurrency=4)
    texts = [f"finding{i}" for i in range(12)] + [""]
    out = s.structure_many(texts)
    assert [fs[0].entity if fs else None for fs in out] == texts[:-1] + [None]


def test_location_mapper_schema():
    m = LLMLocationMapper(Scripted(['{"categories": ["lung"], "labels": ["right lung base", "left lung base"]}']))
    assert m.map("bibasilar") == ["right lung base", "left lung base"]
    bad = LLMLocationMapper(Scripted(['{"categories": ["lung"], "labels": ["lung base"]}']), max_retries=0)
    with pytest.raises(LLMOutputError):
        bad.map("bases")


def test_remote_server_refused_by_default():
    with pytest.raises(ValueError, match="must not leave the site"):
        OpenAIChatClient("https://api.example.com/v1", "m")
    OpenAIChatClient("http://127.0.0.1:8000/v1", "m")
    OpenAIChatClient("https://api.example.com/v1", "m", allow_remote=True)


def test_from_config_needs_a_model():
    from cxrils.report import get_structurer

    with pytest.raises(ValueError, match="llm_base_url"):
        get_structurer("llm", Config())


def test_extract_json_variants():
    assert extract_json("[1, 2] trailing") == [1, 2]
    assert extract_json("null") is None
    with pytest.raises(ValueError):
        extract_json("nothing")


# ------------------------------------------------------------------ issue 17: parsing and tasks
def test_backticks_inside_a_string_do_not_cut_the_answer():
    """A fenced answer whose string holds triple backticks: the first complete JSON value
    is read (a fence-cutting parser read '[]' from inside the string: 0 findings)."""
    ans = {"findings": [{**GOOD["findings"][0], "entity": "opacity ```x``` noted", "location": []}]}
    text = "```json\n" + json.dumps(ans) + "\n```"
    (f,) = LLMStructurer(Scripted([text])).structure("x")
    assert f.entity == "opacity ```x``` noted"
    assert extract_json('Note [see below]: {"a": "x ``` y"} and {"b": 1}') == {"a": "x ``` y"}


def test_incomplete_answer_is_not_read_as_an_inner_value():
    # an unfinished outer object (finish reason "stop"): its first finding must not pass as the answer
    c = Scripted(['{"findings": [' + json.dumps(GOOD["findings"][0]) + ', {"entity": "b"'])
    with pytest.raises(LLMOutputError, match="schema"):
        LLMStructurer(c, max_retries=0).structure("x")


def test_predicted_lesion_type_keeps_the_reports_disease():
    """The paper's sixth field holds whatever disease the report names: an eighth disease
    never fails the section; it is kept as text and grounds as nothing."""
    tb = {
        "findings": [
            {**GOOD["findings"][1], "predicted_lesion_type": "tuberculosis"},
            {**GOOD["findings"][1], "predicted_lesion_type": "Pneumonia"},
            {**GOOD["findings"][1], "predicted_lesion_type": "tuberculous pneumonia"},
        ]
    }
    a, b, c = LLMStructurer(Scripted([json.dumps(tb)]), max_retries=0).structure("x")
    assert (a.lesion_type, a.predicted_lesion_type, a.predicted_lesion_text) == ("opacity", None, "tuberculosis")
    assert a.target_type == "opacity"
    assert (b.predicted_lesion_type, b.predicted_lesion_text) == ("pneumonia", "Pneumonia")
    assert c.predicted_lesion_type is None  # the lexicon's longest phrase is no type


def test_task_settings_and_their_fallback():
    from cxrils.report.llm import llm_endpoint

    cfg = Config()
    cfg.backends.llm_base_url = "http://127.0.0.1:8000/v1"
    cfg.backends.llm_model = "shared"
    # the old shared keys still serve both tasks
    assert llm_endpoint(cfg, "structure") == ("http://127.0.0.1:8000/v1", "", "", "shared")
    assert llm_endpoint(cfg, "locations")[3] == "shared"
    # a task's own model name on the shared server
    cfg.backends.llm_structure_model = "mistralai/Mistral-Small-3.1-24B-Instruct-2503"
    assert llm_endpoint(cfg, "structure") == (
        "http://127.0.0.1:8000/v1",
        "",
        "",
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    )
    # a task's own server replaces the shared place as a whole
    cfg.backends.llm_locations_base_url = "http://127.0.0.1:9000/v1"
    cfg.backends.llm_locations_model = "google/medgemma-27b-text-it"
    assert llm_endpoint(cfg, "locations") == ("http://127.0.0.1:9000/v1", "", "", "google/medgemma-27b-text-it")
    s = LLMStructurer.from_config(cfg)
    m = LLMLocationMapper.from_config(cfg)
    assert (s.client.model, s.client.base_url) == (
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        "http://127.0.0.1:8000/v1",
    )
    assert (m.client.model, m.client.base_url) == ("google/medgemma-27b-text-it", "http://127.0.0.1:9000/v1")
    with pytest.raises(ValueError, match="unknown LLM task"):
        llm_endpoint(cfg, "paraphrase")


def test_missing_task_model_is_a_clear_error():
    from cxrils.report import get_location_mapper

    with pytest.raises(ValueError, match="llm_locations_base_url.*llm_base_url"):
        get_location_mapper("llm", Config())


def test_same_endpoint_shares_one_client():
    from cxrils.report.llm import client_from_config

    cfg = Config()
    cfg.backends.llm_base_url = "http://127.0.0.1:8001/v1"
    assert client_from_config(cfg, "structure") is client_from_config(cfg, "locations")
