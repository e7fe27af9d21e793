"""Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, Ollama, LM Studio.

Uses the ``openai`` SDK (3.x) ``chat.completions.create`` against ``settings.base_url`` (or the
URL in ``settings.base_url_env``; default ``https://api.openai.com/v1``). A system message
describes the JSON answer ``{"sql": ..., "refusal": ...}``; with ``json_mode`` the request
also sets ``response_format={"type": "json_object"}``. The answer is read tolerantly (plain
JSON, a fenced ```json block, or the first JSON object in prose; the template's
``{"kind", "sql", "refusal_reason"}`` shape is accepted too).

Sampling settings are honoured and recorded: ``temperature`` (always sent), ``top_p`` and
``seed`` when set; outputs carry ``temperature_settable=True``.

API keys: read from ``settings.api_key_env``. A local or private endpoint (loopback, private
network, single-label service names such as ``vllm``) works without one — a placeholder key
is sent, as local servers ignore it. A public host without a key raises
``missing_credentials`` at construction.

The client is built, and SDK/HTTP failures become :class:`ProviderError` codes, in
:mod:`sqleval_pipeline.providers.http` (the OpenAI-compatible wire format).

>>> from sqleval_pipeline.configs import OpenAISettings
>>> gen = OpenAIGenerator(OpenAISettings(model="qwen2.5-coder", base_url="http://127.0.0.1:8000/v1",
...                                      api_key_env=None))
>>> gen.name, gen.base_url
('openai:qwen2.5-coder', 'http://127.0.0.1:8000/v1')
>>> gen.close()
"""

from __future__ import annotations

import time
from typing import Any

from sqleval_pipeline.configs import OpenAISettings
from sqleval_pipeline.generation._common import extract_json_object, interpret_answer, prompt_of
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.providers.env import env_value, is_local_url
from sqleval_pipeline.providers.errors import ProviderError, truncate_raw
from sqleval_pipeline.providers.http import create_chat_completion, openai_client
from sqleval_pipeline.pipeline.records import Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: sent to local servers that need no key (the SDK refuses to build a client without one)
LOCAL_PLACEHOLDER_KEY = "sk-no-key-needed-local"

SYSTEM_MESSAGE = (
    "You translate analytics questions into SQL. Reply with one JSON object and nothing else, "
    'of the shape {"sql": "<one SELECT statement>", "refusal": null} to answer, or '
    '{"sql": null, "refusal": "<why the question cannot be answered from the tables>"} to '
    "decline. No Markdown, no commentary."
)


class OpenAIGenerator:
    """A model behind an OpenAI-compatible chat-completions API.

    Args:
        settings: the configuration's ``generator`` block.
        api_key: overrides the key read from ``settings.api_key_env``.
        base_url: overrides ``settings.base_url`` / ``settings.base_url_env``.
        timeout_s: per-call timeout in seconds.

    Raises:
        ProviderError: ``missing_credentials`` when ``base_url_env`` names an unset variable,
            or when a public host (e.g. api.openai.com) has no key.
    """

    def __init__(self, settings: OpenAISettings, *, api_key: str | None = None,
                 base_url: str | None = None, timeout_s: float = 60) -> None:
        self.settings = settings
        self.name = f"openai:{settings.model}"
        self.timeout_s = timeout_s
        self.base_url = (base_url or self._resolve_base_url(settings)).rstrip("/")
        key = api_key or env_value(settings.api_key_env)
        if not key:
            if not is_local_url(self.base_url):
                env_hint = settings.api_key_env or "OPENAI_API_KEY"
                raise ProviderError(
                    "missing_credentials",
                    f"the openai generator needs an API key for {self.base_url}: set {env_hint} "
                    f"(settings.api_key_env) in the environment, e.g. `export {env_hint}=sk-...`; "
                    "local endpoints (vLLM, Ollama, LM Studio on this machine or a private "
                    "network) need none",
                )
            key = LOCAL_PLACEHOLDER_KEY
        self._key_is_placeholder = key == LOCAL_PLACEHOLDER_KEY
        self._client = openai_client(key, base_url=self.base_url, timeout_s=timeout_s)

    @staticmethod
    def _resolve_base_url(settings: OpenAISettings) -> str:
        if settings.base_url:
            return settings.base_url
        if settings.base_url_env:
            url = env_value(settings.base_url_env)
            if not url:
                raise ProviderError(
                    "missing_credentials",
                    f"the openai generator needs an endpoint: set {settings.base_url_env} "
                    f"(settings.base_url_env) to the server's base URL, e.g. "
                    f"`export {settings.base_url_env}=http://127.0.0.1:8000/v1`",
                )
            return url
        return DEFAULT_BASE_URL

    def request_params(self, ctx: GenerationContext) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for this case."""
        params: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [
                {"role": "system", "content": SYSTEM_MESSAGE},
                {"role": "user", "content": prompt_of(ctx)},
            ],
            "max_tokens": self.settings.max_tokens,
            "temperature": self.settings.temperature,
        }
        if self.settings.top_p is not None:
            params["top_p"] = self.settings.top_p
        if self.settings.seed is not None:
            params["seed"] = self.settings.seed
        if self.settings.json_mode:
            params["response_format"] = {"type": "json_object"}
        return params

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        """Ask the model for the case; SQL or a refusal, or a :class:`ProviderError`."""
        started = time.perf_counter()
        completion = create_chat_completion(self._client, self.request_params(ctx),
                                            base_url=self.base_url, timeout_s=self.timeout_s,
                                            credential_hint=self._credential_hint())
        latency_ms = (time.perf_counter() - started) * 1000.0
        return self._output(completion, latency_ms)

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _output(self, completion: Any, latency_ms: float) -> GenerationOutput:
        raw = truncate_raw(completion.to_json(indent=None))
        usage_obj = getattr(completion, "usage", None)
        usage = Usage(
            input_tokens=getattr(usage_obj, "prompt_tokens", None),
            output_tokens=getattr(usage_obj, "completion_tokens", None),
            latency_ms=round(latency_ms, 3),
        )
        common = {"usage": usage, "raw_response": raw,
                  "model": getattr(completion, "model", None) or self.settings.model,
                  "temperature": self.settings.temperature, "temperature_settable": True}
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise ProviderError("malformed_response", "the completion has no choices",
                                retryable=True, raw_response=raw)
        message = choices[0].message
        api_refusal = getattr(message, "refusal", None)
        content = message.content if isinstance(message.content, str) else None
        if not content:
            if api_refusal:
                return GenerationOutput(kind="refusal", refusal_reason=str(api_refusal), **common)
            raise ProviderError(
                "malformed_response",
                f"the completion has no content (finish_reason={choices[0].finish_reason})",
                retryable=True, raw_response=raw)
        obj = extract_json_object(content)
        if obj is None:
            raise ProviderError("malformed_response",
                                f"the model's answer contains no JSON object: {_excerpt(content)}",
                                retryable=True, raw_response=raw)
        try:
            kind, sql, reason = interpret_answer(obj)
        except ValueError as exc:
            raise ProviderError("malformed_response", f"the model's JSON is not an answer: {exc}",
                                retryable=True, raw_response=raw) from exc
        return GenerationOutput(kind=kind, sql=sql, refusal_reason=reason, **common)  # type: ignore[arg-type]

    def _credential_hint(self) -> str:
        """What to check when the server answers 401/403 (named in the ``auth_error``)."""
        if not self._key_is_placeholder:
            return f"the key in {self.settings.api_key_env or 'the api_key argument'}"
        if self.settings.api_key_env:
            return f"this server wants a key: set {self.settings.api_key_env} (settings.api_key_env)"
        return ("this server wants a key: set settings.api_key_env to the name of an "
                "environment variable holding it")


def _excerpt(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "…")
