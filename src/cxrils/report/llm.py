"""The ``llm`` backends: the paper's LLM report structuring and location mapping.

The paper ran Mistral-Small-3.1-24B-Instruct (structuring, Appendix A.2 Figure 9)
and medgemma-27b-text-it (location mapping, Figure 10) locally, because report
text must not leave the site. This module talks to any OpenAI-compatible server
on the user's machine or network (vLLM, llama.cpp server, Ollama) through httpx,
or runs a model in-process with transformers; a server outside loopback/private
addresses is refused unless ``llm_allow_remote`` is set.

Structuring and location mapping can use different models (the paper: Mistral-Small-
3.1-24B-Instruct-2503 and medgemma-27b-text-it): ``backends.llm_structure_*`` and
``backends.llm_locations_*``, falling back to the shared ``backends.llm_*`` keys.

Answers must hold one JSON object that a JSON Schema validates; the first complete
JSON value of the answer is read, so code fences and prose around it are skipped and
backticks inside its strings do no harm. The predicted lesion type is the report's
disease in its words (the paper's sixth field, any disease); it becomes
``Finding.predicted_lesion_text`` and, where it names one of the seven types,
``Finding.predicted_lesion_type``. An answer cut off by the token
budget (finish reason "length") raises :class:`LLMTruncatedError` and is never
"repaired" into fewer findings. Invalid answers are re-asked at most
``llm_max_retries`` times, then :class:`LLMOutputError` is raised. Answers are
cached by a hash of (model, prompt, text); many texts run concurrently.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from cxrils.fsutil import atomic_write_json
from cxrils.report.lexicon import entity_lesion_type
from cxrils.types import Finding
from cxrils.vocab import BROAD_CATEGORIES, CERTAINTIES, LUNG_REGION_LABELS, PRESENCES


class LLMError(RuntimeError):
    """Base class of the LLM backend's errors."""


class LLMTruncatedError(LLMError):
    """The answer hit the token budget (finish reason "length"); ``text`` is the partial answer."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.text = text


class LLMOutputError(LLMError):
    """No valid JSON answer after the allowed retries; ``text`` is the last answer."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.text = text


@dataclass
class Completion:
    """One chat answer: its text and the finish reason ("stop", "length", ...)."""

    text: str
    finish_reason: str


class ChatClient(Protocol):
    """A chat model: ``complete(messages, max_tokens) -> Completion``."""

    model: str

    def complete(self, messages: list[dict], *, max_tokens: int) -> Completion:
        """The model's answer to chat ``messages`` (OpenAI form: ``{"role", "content"}``
        dicts), at most ``max_tokens`` tokens long."""
        ...


def _is_local(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


class OpenAIChatClient:
    """Client of an OpenAI-compatible ``/chat/completions`` endpoint (httpx).

    Parameters
    ----------
    base_url : str
        E.g. ``http://127.0.0.1:8000/v1`` (vLLM), ``http://localhost:8080/v1``
        (llama.cpp server), ``http://localhost:11434/v1`` (Ollama).
    model : str
        Model name the server expects.
    timeout_s : float
        Per-request timeout in seconds.
    allow_remote : bool
        Allow a host outside loopback/private networks (off by default: report
        text must not leave the site, paper Appendix A.2).
    api_key : str, optional
        Sent as a bearer token when given.

    Raises
    ------
    ValueError
        For a malformed URL or a remote host without ``allow_remote``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout_s: float = 120.0,
        allow_remote: bool = False,
        api_key: str | None = None,
    ) -> None:
        import httpx

        parsed = urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"LLM base URL {base_url!r} is not an http(s) URL")
        if not allow_remote and not _is_local(parsed.hostname):
            raise ValueError(
                f"LLM server {parsed.hostname!r} is not on this machine or a private network; report "
                "text must not leave the site. Set backends.llm_allow_remote=true to allow it."
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=timeout_s, headers=headers)

    def complete(self, messages: list[dict], *, max_tokens: int) -> Completion:
        """POST one chat request (temperature 0) and return the first choice.

        Raises
        ------
        LLMError
            On an HTTP error or a response without a choice.
        """
        import httpx

        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        try:
            r = self._http.post(f"{self.base_url}/chat/completions", json=body)
            r.raise_for_status()
            choice = r.json()["choices"][0]
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as err:
            raise LLMError(f"LLM server {self.base_url}: {err}") from err
        return Completion(choice["message"].get("content") or "", choice.get("finish_reason") or "stop")


class TransformersChatClient:
    """A causal LM run in-process with transformers (greedy decoding).

    Parameters
    ----------
    model_path : str
        A local model folder (or the folder holding ``gguf_file``); nothing is
        downloaded.
    gguf_file : str, optional
        A GGUF file in ``model_path`` (transformers dequantises it; needs ``gguf``).
    threads : int, optional
        torch CPU threads.

    Raises
    ------
    cxrils.extras.MissingExtraError
        If transformers (or, for ``gguf_file``, gguf) is not installed: the extra ``llm``.
    FileNotFoundError
        If ``model_path`` does not exist.
    """

    def __init__(self, model_path: str, gguf_file: str | None = None, *, threads: int | None = None) -> None:
        from cxrils.extras import require

        # one line naming the extra and its install command (cxrils.extras), not an ImportError
        require("llm", ("transformers", "gguf") if gguf_file else ("transformers",), "a local LLM (llm_model_path)")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not Path(model_path).exists():
            raise FileNotFoundError(f"{model_path}: local LLM folder not found (nothing is downloaded)")
        if threads:
            torch.set_num_threads(threads)
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True, **kw)
        self.model_obj = AutoModelForCausalLM.from_pretrained(
            model_path, local_files_only=True, dtype=torch.float32, **kw
        )
        self.model_obj.eval()
        self.model = f"{Path(model_path).name}/{gguf_file or ''}".rstrip("/")
        self._lock = threading.Lock()  # one generate at a time per model

    def complete(self, messages: list[dict], *, max_tokens: int) -> Completion:
        """Generate greedily; finish reason "length" when ``max_tokens`` ran out."""
        import torch

        enc = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        enc = {k: v.to(self.model_obj.device) for k, v in enc.items()}  # where the model is (a GPU too)
        with self._lock, torch.inference_mode():
            out = self.model_obj.generate(
                **enc, max_new_tokens=max_tokens, do_sample=False, pad_token_id=self.tokenizer.eos_token_id
            )
        new = out[0, enc["input_ids"].shape[1] :].tolist()
        eos = self.tokenizer.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos])
        finished = bool(new) and new[-1] in eos_ids
        reason = "stop" if finished or len(new) < max_tokens else "length"
        return Completion(self.tokenizer.decode(new, skip_special_tokens=True), reason)


#: Tasks with their own model settings (paper section 3.1 step 1: Mistral-Small-3.1-24B-
#: Instruct-2503 structures reports, medgemma-27b-text-it maps locations).
LLM_TASKS = ("structure", "locations")


def llm_endpoint(cfg, task: str | None = None) -> tuple[str, str, str, str]:
    """``(base_url, model_path, gguf_file, model)`` of the LLM for ``task``.

    ``task`` "structure" or "locations" reads ``backends.llm_<task>_*``; where the
    model runs (``base_url``, else ``model_path`` + ``gguf_file``) falls back to the
    shared ``backends.llm_*`` keys as a whole when the task sets neither
    ``llm_<task>_base_url`` nor ``llm_<task>_model_path``; the model name falls back to
    ``backends.llm_model`` on its own. None: the shared keys (e.g. paraphrasing).

    Raises
    ------
    ValueError
        For a task not in :data:`LLM_TASKS`.
    """
    b = cfg.backends
    if task is None:
        return b.llm_base_url, b.llm_model_path, b.llm_gguf_file, b.llm_model
    if task not in LLM_TASKS:
        raise ValueError(f"unknown LLM task {task!r}; choose one of {LLM_TASKS}")
    model = getattr(b, f"llm_{task}_model") or b.llm_model
    url, path = getattr(b, f"llm_{task}_base_url"), getattr(b, f"llm_{task}_model_path")
    if url or path:
        return url, path, getattr(b, f"llm_{task}_gguf_file"), model
    return b.llm_base_url, b.llm_model_path, b.llm_gguf_file, model


def llm_weight_files(cfg) -> list[str]:
    """The local LLM folder a run hashes into its provenance: the shared
    ``backends.llm_model_path`` when set (even when a server, ``llm_base_url``, answers
    instead), for report structuring, location mapping and instruction paraphrasing
    alike, else nothing. Known gap: a per-task ``backends.llm_<task>_model_path`` is not
    listed (listing it would change the recorded weights of existing datasets)."""
    return [p for p in [cfg.backends.llm_model_path] if p]


_CLIENTS: dict[tuple, ChatClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_from_config(cfg, task: str | None = None) -> ChatClient:
    """The chat client for ``task`` (see :func:`llm_endpoint`): a server URL, else a
    local model. Two tasks on the same endpoint share one client (a local model is
    loaded once).

    Raises
    ------
    ValueError
        If the task has no server URL and no local model path.
    """
    url, path, gguf, model = llm_endpoint(cfg, task)
    b = cfg.backends
    if not url and not path:
        keys = f"backends.llm_{task}_base_url or backends.llm_{task}_model_path, or the shared " if task else ""
        raise ValueError(
            f"the llm backend{f' for {task}' if task else ''} needs {keys}backends.llm_base_url (an "
            "OpenAI-compatible server such as vLLM, llama.cpp server or Ollama) or backends.llm_model_path "
            "(a local model folder)"
        )
    key = (url, model or "default", b.llm_timeout_s, b.llm_allow_remote) if url else (path, gguf)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = (
                OpenAIChatClient(url, model or "default", timeout_s=b.llm_timeout_s, allow_remote=b.llm_allow_remote)
                if url
                else TransformersChatClient(path, gguf or None)
            )
        return _CLIENTS[key]


# ----------------------------------------------------------------------------- JSON
def extract_json(text: str) -> Any:
    """The first complete JSON object or array in a model answer.

    Each ``{`` or ``[`` in turn is tried as the start of a JSON value, so code fences
    and prose around the value are skipped, and backticks inside its strings are
    kept (a fence is never used to cut the answer). "None" or "null" alone is None
    (the paper's answer for no finding).

    Raises
    ------
    ValueError
        If the text holds no complete JSON object or array.
    """
    dec = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            return dec.raw_decode(text, m.start())[0]
        except json.JSONDecodeError:
            continue
    if re.fullmatch(r"\s*`*\s*(none|null)\s*\.?\s*`*\s*", text, re.IGNORECASE):
        return None
    raise ValueError("no complete JSON object in the answer")


FINDINGS_SCHEMA: dict = {
    "type": "object",
    "required": ["findings"],
    "properties": {
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["entity", "sentence_index", "presence", "certainty", "location", "predicted_lesion_type"],
                "properties": {
                    "entity": {"type": "string", "minLength": 1},
                    "sentence_index": {"type": "integer", "minimum": 1},
                    "presence": {"enum": list(PRESENCES)},
                    "certainty": {"enum": list(CERTAINTIES)},
                    "location": {"type": "array", "items": {"type": "string"}},
                    # the disease the report names, in its words (any disease, not only the seven types)
                    "predicted_lesion_type": {"type": ["string", "null"]},
                },
            },
        }
    },
}
LOCATION_SCHEMA: dict = {
    "type": "object",
    "required": ["categories", "labels"],
    "properties": {
        "categories": {"type": "array", "items": {"enum": list(BROAD_CATEGORIES)}},
        "labels": {"type": "array", "items": {"enum": list(LUNG_REGION_LABELS)}},
    },
}


def _prompt(name: str) -> str:
    return resources.files("cxrils.report").joinpath("prompts", name).read_text(encoding="utf-8")


class _LLMBase:
    """Shared machinery: prompt, schema validation, retries, cache, concurrency."""

    prompt_name = ""
    schema: dict = {}

    def __init__(
        self,
        client: ChatClient,
        *,
        max_tokens: int = 2048,
        max_retries: int = 2,
        concurrency: int = 4,
        cache_dir: str | Path | None = None,
    ) -> None:
        import jsonschema

        self.client = client
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.concurrency = max(1, concurrency)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.template = _prompt(self.prompt_name)
        self._validator = jsonschema.Draft202012Validator(self.schema)
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    task: str | None = None  # which backends.llm_<task>_* settings apply

    @classmethod
    def from_config(cls, cfg, client: ChatClient | None = None):
        b = cfg.backends
        return cls(
            client or client_from_config(cfg, cls.task),
            max_tokens=b.llm_max_tokens,
            max_retries=b.llm_max_retries,
            concurrency=b.llm_concurrency,
            cache_dir=b.llm_cache_dir or None,
        )

    @classmethod
    def weight_files(cls, cfg) -> list[str]:
        """The local model folder to hash into a dataset's provenance:
        :func:`llm_weight_files`."""
        return llm_weight_files(cfg)

    @property
    def version(self) -> str:
        return f"llm {self.client.model} prompt-{hashlib.sha256(self.template.encode()).hexdigest()[:8]}"

    def _key(self, text: str) -> str:
        h = hashlib.sha256()
        for part in (self.client.model, self.template, text):
            h.update(part.encode("utf-8") + b"\0")
        return h.hexdigest()

    def _render(self, text: str) -> str:
        raise NotImplementedError

    def _normalise(self, obj: Any) -> Any:
        return obj

    def ask(self, text: str) -> Any:
        """The validated JSON answer for ``text`` (cached).

        Raises
        ------
        LLMTruncatedError
            The answer hit ``max_tokens`` (raise the budget; never shortened).
        LLMOutputError
            No valid answer after ``1 + max_retries`` tries.
        """
        key = self._key(text)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        path = self.cache_dir / f"{key}.json" if self.cache_dir else None
        if path is not None and path.exists():
            obj = json.loads(path.read_text(encoding="utf-8"))
            with self._lock:
                self._cache[key] = obj
            return obj
        messages = [{"role": "user", "content": self._render(text)}]
        last, problem = "", ""
        for _ in range(1 + self.max_retries):
            c = self.client.complete(messages, max_tokens=self.max_tokens)
            last = c.text
            if c.finish_reason == "length":
                raise LLMTruncatedError(
                    f"LLM answer cut off at max_tokens={self.max_tokens} (finish reason 'length'); "
                    "raise backends.llm_max_tokens",
                    c.text,
                )
            try:
                obj = self._normalise(extract_json(c.text))
                errors = sorted(self._validator.iter_errors(obj), key=str)
                if errors:
                    raise ValueError(f"schema: {errors[0].message} at {list(errors[0].absolute_path)}")
            except ValueError as err:
                problem = str(err)
                continue
            with self._lock:
                self._cache[key] = obj
            if path is not None:
                atomic_write_json(path, obj)
            return obj
        raise LLMOutputError(f"no valid JSON answer after {1 + self.max_retries} tries: {problem}", last)

    def ask_many(self, texts: list[str]) -> list[Any]:
        """:meth:`ask` over many texts with ``concurrency`` requests in flight, in order."""
        if self.concurrency == 1 or len(texts) <= 1:
            return [self.ask(t) for t in texts]
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(self.ask, texts))


class LLMStructurer(_LLMBase):
    """Report structuring with an LLM and the paper's extraction rules (Figure 9).

    Parameters
    ----------
    client : ChatClient
        :class:`OpenAIChatClient` or :class:`TransformersChatClient`.
    max_tokens, max_retries, concurrency, cache_dir
        See :class:`cxrils.config.BackendConfig` (``llm_*``).
    """

    name = "llm"
    prompt_name = "structure.txt"
    schema = FINDINGS_SCHEMA
    task = "structure"

    def _render(self, text: str) -> str:
        return self.template.replace("{report}", text)

    def _normalise(self, obj: Any) -> Any:
        # "None" (the paper's answer for no finding) and a bare list are accepted shapes.
        if obj is None:
            return {"findings": []}
        if isinstance(obj, list):
            return {"findings": obj}
        return obj

    def _findings(self, obj: dict) -> list[Finding]:
        out = []
        for d in obj["findings"]:
            predicted = (d["predicted_lesion_type"] or "").strip() or None
            out.append(
                Finding(
                    entity=d["entity"].strip(),
                    sentence_index=int(d["sentence_index"]),
                    presence=d["presence"],
                    certainty=d["certainty"],
                    locations=[x.strip().lower() for x in d["location"] if x.strip()],
                    lesion_type=entity_lesion_type(d["entity"]),
                    # the report's disease is kept as text; it grounds only when it is one of our types
                    predicted_lesion_type=entity_lesion_type(predicted) if predicted else None,
                    predicted_lesion_text=predicted,
                )
            )
        return out

    def structure(self, text: str) -> list[Finding]:
        """Findings of one section text (labels empty). Raises as :meth:`ask`."""
        if not text or not text.strip():
            return []
        return self._findings(self.ask(text))

    def structure_many(self, texts: Iterable[str]) -> list[list[Finding]]:
        """:meth:`structure` over many texts, requests running concurrently."""
        texts = list(texts)
        idx = [i for i, t in enumerate(texts) if t and t.strip()]
        answers = self.ask_many([texts[i] for i in idx])
        out: list[list[Finding]] = [[] for _ in texts]
        for i, obj in zip(idx, answers):
            out[i] = self._findings(obj)
        return out


class LLMLocationMapper(_LLMBase):
    """The paper's two-step location mapping with an LLM (Figure 10).

    Labels outside the vocabulary fail schema validation; lung labels are kept
    only when step 1 said lung.
    """

    name = "llm"
    prompt_name = "locations.txt"
    schema = LOCATION_SCHEMA
    task = "locations"

    def __init__(self, client: ChatClient, **kw) -> None:
        super().__init__(client, **{"max_tokens": 256, **kw})

    def _render(self, text: str) -> str:
        return self.template.replace("{lung_labels}", ", ".join(LUNG_REGION_LABELS)).replace("{phrase}", text)

    def map(self, phrase: str) -> list[str]:
        """Lung-region labels, or the broad categories of a non-lung phrase; [] if none."""
        obj = self.ask(phrase)
        cats = list(dict.fromkeys(obj["categories"]))
        lung = [lab for lab in LUNG_REGION_LABELS if lab in obj["labels"]] if "lung" in cats else []
        return lung + [c for c in cats if c != "lung"]
