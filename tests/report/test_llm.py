"""The llm backend's plumbing with a scripted chat client (no model)."""

import json
import threading

import pytest

pytest.importorskip("jsonschema")

from cxrils.config import Config  # noqa: E402
from cxrils.report.llm import (  # noqa: E402
    Completion, LLMLocationMapper, LLMOutputError, LLMStructurer, LLMTruncatedError, OpenAIChatClient,
    extract_json,
)

GOOD = {"findings": [{"entity": "adenopathy", "sentence_index": 1, "presence": "positive",
                      "certainty": "definitive", "location": ["hilar"], "predicted_lesion_type": None},
                     {"entity": "opacity", "sentence_index": 2, "presence": "positive",
                      "certainty": "tentative", "location": ["left base"], "predicted_lesion_type": "pneumonia"}]}


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
    for rule in ["No change in pneumothorax", "has\n   been resolved", "hilar adenopathy", "devices",
                 '"clear"', "cannot exclude pneumothorax"]:
        assert rule in p


def test_parses_fenced_answer_with_prose():
    c = Scripted(["Here you go:\n```json\n" + json.dumps(GOOD) + "\n```\nLet me know!"])
    fs = LLMStructurer(c).structure("x")
    assert [(f.entity, f.locations, f.lesion_type, f.predicted_lesion_type) for f in fs] == [
        ("adenopathy", ["hilar"], None, None), ("opacity", ["left base"], "opacity", "pneumonia")]


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
    assert extract_json('[1, 2] trailing') == [1, 2]
    assert extract_json("null") is None
    with pytest.raises(ValueError):
        extract_json("nothing")
