"""The OpenAI-compatible chat client lode's remote answerer and LLM judge talk through
(MODELS.md "Language models").

`ChatClient.complete_json` POSTs to `{LODE_LLM_BASE_URL}/chat/completions` (the base URL
includes `/v1`) asking for JSON-schema output (`response_format: json_schema`, strict), with
`max_tokens`, `temperature` 0, a timeout and bounded retries, and returns the parsed object.
It works with hosted models, Ollama, vLLM and the llama.cpp server.

Egress (DESIGN.md invariant 8): every message is passed through `retrieval.answer.redaction` again
(a backstop: callers redact first, and redaction is idempotent), and **one `EgressLog` row is
written and committed before each HTTP attempt** — a retry re-sends the same content, so it is
its own egress event with its own row (same request hash). Counting logical requests instead
would leave a retried send without a row written before it. If the row cannot be committed
first, nothing is sent.

Failure is always an `LLMError` with a clear message, never a half-parsed result:

* transport: timeouts (`LODE_LLM_TIMEOUT_SECONDS`), connection and protocol errors, HTTP 429
  and 5xx are retried (by `tenacity`) up to `LODE_LLM_MAX_RETRIES` times with exponential
  backoff (a numeric `Retry-After` is honoured up to the cap); other 4xx fail at once
  (retrying a bad request cannot help);
* content: `finish_reason` "length" (cut off at `max_tokens`) is "truncated"; a missing,
  empty or refused message, JSON that does not parse, or JSON that does not match the schema
  (checked by `jsonschema`) is "malformed". Parsing is forgiving only where that cannot change
  meaning: a ```json fence around the object is removed, raw newlines inside strings (tiny
  models emit them) are accepted, and prose around a single object is ignored.

The API key is sent as `Authorization: Bearer …` and never stored: the request kept for the
trace shows `[REDACTED:api-key]`, and the key's literal text is redacted from the messages.

The LLM judge (`retrieval.answer.entailment.LLMJudge`) asks the same endpoint whether a premise
entails a hypothesis, purpose "judge"; this module knows nothing of entailment.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from jsonschema import Draft202012Validator
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from lode_site import budget
from retrieval.answer.egress import EgressLogError, destination_host, log_egress
from retrieval.answer.redaction import marker, redact
from retrieval.answer.types import PackItem

logger = logging.getLogger("lode.llm")

# How much of an error response body goes into the error message.
ERROR_BODY_CHARS = 300

_FENCE_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n?(?P<body>.*?)(?:```|\Z)", re.DOTALL)


class LLMError(Exception):
    """The chat endpoint could not produce a usable answer. str() is a clear, user-facing
    reason; `request` (redacted) and `response` are kept for the trace when known."""

    def __init__(
        self,
        message: str,
        *,
        request: dict[str, Any] | None = None,
        response: dict[str, Any] | str | None = None,
    ):
        super().__init__(message)
        self.request = request
        self.response = response


class _RetryableFailure(Exception):
    """An attempt failed in a way another attempt may not: a timeout, a dropped connection,
    HTTP 429 or 5xx. str() says how; `retry_after` is the server's numeric `Retry-After`."""

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


# --- parsing -------------------------------------------------------------------------------


def _unbalanced(text: str) -> bool:
    """Whether `text` stops inside a string or with an object/array still open: the shape of
    output cut off mid-JSON."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0


def parse_json_content(content: str) -> Any:
    """The JSON value in a model's message content. Accepts a ```json fence, raw control
    characters (newlines) inside strings and prose around one object; raises LLMError
    otherwise, saying where the JSON broke (and whether it looks cut off)."""
    text = content.strip()
    candidates = [text]
    fence = _FENCE_RE.search(text)
    if fence is not None:
        candidates.append(fence.group("body").strip())
    start, end = candidates[-1].find("{"), candidates[-1].rfind("}")
    if 0 <= start < end:
        candidates.append(candidates[-1][start : end + 1])
    first: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            return json.loads(candidate, strict=False)
        except json.JSONDecodeError as exc:
            first = first or exc
    assert first is not None
    where = f"{first.msg} at line {first.lineno} column {first.colno}"
    if _unbalanced(candidates[1] if fence is not None else text):
        raise LLMError(f"the model's JSON ends early (truncated output?): {where}")
    raise LLMError(f"the model's output is not valid JSON: {where}")


def schema_errors(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """Where `value` breaks `schema` (JSON Schema draft 2020-12, checked by `jsonschema`), each
    as "<JSON path>: <reason>", in document order. Empty means valid. A JSON `true` is not an
    integer, as JSON Schema says (Python's bool is an int)."""
    validator = Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda error: error.json_path)
    return [f"{error.json_path}: {error.message}" for error in errors]


def quote_tag(texts: list[str]) -> str:
    """A delimiter tag that occurs in none of `texts`, so quoted data cannot forge the end of
    its own block ("END EVIDENCE …" inside a note stays data). Derived from the texts, so the
    same evidence always makes the same request (and request hash)."""
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
    for offset in range(0, len(digest) - 10):
        tag = digest[offset : offset + 10]
        if not any(tag in text for text in texts):
            return tag
    counter = 0
    while any(f"q{counter}x" in text for text in texts):
        counter += 1
    return f"q{counter}x"


# --- the client -------------------------------------------------------------------------------


class ChatClient:
    """One OpenAI-compatible endpoint, configured from settings (`LODE_LLM_*`) unless given.

    `backoff_seconds` is the first retry delay (doubled per retry, capped at
    `max_backoff_seconds`); tests shrink it.
    """

    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_tokens: int | None = None,
        response_format: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = (settings.LODE_LLM_BASE_URL if base_url is None else base_url).rstrip("/")
        self.model = settings.LODE_LLM_MODEL if model is None else model
        self.api_key = settings.LODE_LLM_API_KEY if api_key is None else api_key
        self.timeout = float(settings.LODE_LLM_TIMEOUT_SECONDS if timeout is None else timeout)
        self.max_retries = settings.LODE_LLM_MAX_RETRIES if max_retries is None else max_retries
        self.max_tokens = settings.LODE_LLM_MAX_TOKENS if max_tokens is None else max_tokens
        self.response_format = (
            settings.LODE_LLM_RESPONSE_FORMAT if response_format is None else response_format
        )
        self.transport = transport

    @property
    def configured(self) -> bool:
        """Whether an endpoint is set (`LODE_LLM_BASE_URL`); the model name may be empty for
        servers that serve one model and ignore it."""
        return bool(self.base_url)

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    @property
    def host(self) -> str:
        return destination_host(self.url)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _redacted_headers(self) -> dict[str, str]:
        headers = self._headers()
        if "Authorization" in headers:
            headers["Authorization"] = f"Bearer {marker('api-key')}"
        return headers

    def _redact_messages(self, messages: list[dict]) -> tuple[list[dict], int]:
        """The messages with secrets (and the client's own API key) redacted, and the count."""
        cleaned: list[dict] = []
        total = 0
        for message in messages:
            content = message.get("content", "")
            if isinstance(content, str):
                content, count = redact(content)
                # A key short enough to be an ordinary word is not searched for (it would
                # mangle the text); real keys are long.
                if len(self.api_key) >= 12 and self.api_key in content:
                    total += content.count(self.api_key)
                    content = content.replace(self.api_key, marker("api-key"))
                total += count
            cleaned.append({**message, "content": content})
        return cleaned, total

    def _payload(self, messages: list[dict], schema: dict, schema_name: str) -> dict[str, Any]:
        payload: dict[str, Any] = {}
        if self.model:
            payload["model"] = self.model
        payload.update(
            {
                "messages": messages,
                "response_format": self._response_format(schema, schema_name),
                "max_tokens": self.max_tokens,
                "temperature": 0,
                "stream": False,
            }
        )
        return payload

    def _response_format(self, schema: dict, schema_name: str) -> dict[str, Any]:
        """OpenAI's `json_schema` form by default; `json_object` with the schema beside it for
        servers that only know that form (llama-cpp-python's server answers `json_schema`
        with HTTP 500). Either way the reply is validated against `schema` here."""
        if self.response_format == "json_object":
            return {"type": "json_object", "schema": schema}
        return {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        }

    def _hint(self, text: str) -> str:
        """A pointer to the setting when a server seems to reject the `json_schema` form."""
        if self.response_format == "json_schema" and "response_format" in text:
            return (
                " — this server may not support response_format json_schema; try "
                "LODE_LLM_RESPONSE_FORMAT=json_object"
            )
        return ""

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: `backoff_seconds` doubled per retry, capped at
        `max_backoff_seconds`; a numeric `Retry-After` lengthens it, up to the same cap."""
        delay = wait_exponential(multiplier=self.backoff_seconds, max=self.max_backoff_seconds)(
            state
        )
        failure = state.outcome.exception() if state.outcome is not None else None
        if isinstance(failure, _RetryableFailure) and failure.retry_after is not None:
            delay = min(max(delay, failure.retry_after), self.max_backoff_seconds)
        return delay

    @staticmethod
    def _sleep(seconds: float) -> None:
        """Wait between attempts; waiting on the endpoint is not this server's work, so the
        request's time budget is paused."""
        with budget.paused():
            time.sleep(seconds)

    def complete_json(
        self,
        *,
        messages: list[dict],
        schema: dict,
        schema_name: str,
        user: AbstractBaseUser | AnonymousUser | None,
        purpose: str,
        items: list[PackItem],
        redaction_count: int,
        withheld_count: int,
        item_chars: Mapping[int, int] | None = None,
        validate: bool = True,
    ) -> tuple[dict, dict, dict]:
        """Send `messages` and return (parsed JSON object, redacted request, raw response).

        An egress row (purpose, `items` and their `item_chars`, `redaction_count` plus what
        the backstop redaction finds, `withheld_count`) is committed before each attempt.
        With `validate` the object must match `schema`. Raises LLMError on any failure.
        """
        if not self.configured:
            raise LLMError("no language model endpoint is configured (LODE_LLM_BASE_URL)")
        messages, extra = self._redact_messages(messages)
        payload = self._payload(messages, schema, schema_name)
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        chars_sent = sum(len(m["content"]) for m in messages if isinstance(m["content"], str))
        request = {
            "url": self.url,
            "headers": self._redacted_headers(),
            "body": payload,
            "sha256": hashlib.sha256(body).hexdigest(),
        }
        attempts = self.max_retries + 1
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_RetryableFailure),
            sleep=self._sleep,
            reraise=True,
        )
        egress = {
            "user": user,
            "purpose": purpose,
            "items": items,
            "chars_sent": chars_sent,
            "redaction_count": redaction_count + extra,
            "withheld_count": withheld_count,
            "item_chars": item_chars,
        }
        with httpx.Client(timeout=self.timeout, transport=self.transport) as http:
            try:
                response = retrying(self._attempt, http, body, request, egress)
            except _RetryableFailure as exc:
                tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
                logger.warning("LLM request to %s failed after %s: %s", self.host, tries, exc)
                raise LLMError(
                    f"the model endpoint {self.host} failed after {tries}: {exc}",
                    request=request,
                ) from None
        return self._parse(response, schema, schema_name, request, validate)

    def complete_tools(
        self,
        *,
        messages: list[dict],
        tools: list[dict],
        user: AbstractBaseUser | AnonymousUser | None,
        redaction_count: int = 0,
    ) -> tuple[dict, dict]:
        """One round of a tool conversation: send `messages` with `tools` offered and return
        (the reply's message — content and/or `tool_calls` — and the redacted request). Egress
        and retries as in `complete_json` (purpose "qa"; the messages carry the question and
        tool results, never pack items). Raises LLMError on any failure."""
        if not self.configured:
            raise LLMError("no language model endpoint is configured (LODE_LLM_BASE_URL)")
        messages, extra = self._redact_messages(messages)
        payload: dict[str, Any] = {"model": self.model} if self.model else {}
        payload.update(
            {
                "messages": messages,
                "tools": tools,
                "tool_choice": "auto",
                "max_tokens": self.max_tokens,
                "temperature": 0,
                "stream": False,
            }
        )
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        request = {"url": self.url, "headers": self._redacted_headers(), "body": payload}
        egress = {
            "user": user,
            "purpose": "qa",
            "items": [],
            "chars_sent": sum(len(m.get("content") or "") for m in messages),
            "redaction_count": redaction_count + extra,
            "withheld_count": 0,
        }
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(_RetryableFailure),
            sleep=self._sleep,
            reraise=True,
        )
        with httpx.Client(timeout=self.timeout, transport=self.transport) as http:
            try:
                response = retrying(self._attempt, http, body, request, egress)
            except _RetryableFailure as exc:
                raise LLMError(f"the model endpoint {self.host} failed: {exc}") from None
        raw = self._reply_object(response, request)
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError("the model endpoint's reply has no choices", request=request)
        message = choices[0].get("message")
        return (message if isinstance(message, dict) else {}), request

    def _attempt(
        self,
        http: httpx.Client,
        body: bytes,
        request: dict[str, Any],
        egress: Mapping[str, Any],
    ) -> httpx.Response:
        """One attempt: commit its egress row, then POST `body`. Returns a 2xx/3xx response;
        raises `_RetryableFailure` for a timeout, a connection or protocol error, HTTP 429 or
        5xx, and LLMError for anything retrying cannot help (the row not committed, other
        4xx, other transport errors)."""
        try:
            log_egress(destination_url=self.url, request_body=body, **egress)
        except EgressLogError as exc:
            raise LLMError(f"not sent: {exc}", request=request) from exc
        try:
            # The network wait has its own timeout; the request's time budget
            # (lode_site/budget.py) counts only this server's work.
            with budget.paused():
                response = http.post(self.url, content=body, headers=self._headers())
        except httpx.TimeoutException:
            raise _RetryableFailure(f"timed out after {self.timeout:g} s") from None
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            raise _RetryableFailure(f"connection failed ({type(exc).__name__}: {exc})") from None
        except httpx.HTTPError as exc:
            raise LLMError(
                f"request to {self.host} failed: {type(exc).__name__}: {exc}",
                request=request,
            ) from exc
        status = response.status_code
        text = response.text[:ERROR_BODY_CHARS]
        if status == 429 or status >= 500:
            retry_after = response.headers.get("Retry-After", "").strip()
            raise _RetryableFailure(
                f"HTTP {status}: {text}{self._hint(text)}",
                retry_after=float(retry_after) if retry_after.isdigit() else None,
            )
        if status >= 400:
            raise LLMError(
                f"the model endpoint {self.host} refused the request "
                f"(HTTP {status}): {text}{self._hint(text)}",
                request=request,
                response={"status": status, "text": text},
            )
        return response

    def _parse(
        self,
        response: httpx.Response,
        schema: dict,
        schema_name: str,
        request: dict[str, Any],
        validate: bool,
    ) -> tuple[dict, dict, dict]:
        raw = self._reply_object(response, request)

        def fail(message: str) -> LLMError:
            return LLMError(message, request=request, response=raw)

        content = self._answer_content(raw, fail)
        try:
            parsed = parse_json_content(content)
        except LLMError as exc:
            raise fail(str(exc)) from None
        if not isinstance(parsed, dict):
            raise fail("the model's JSON is not an object")
        if validate:
            errors = schema_errors(parsed, schema)
            if errors:
                shown = "; ".join(errors[:3])
                raise fail(f"the model's JSON does not match the {schema_name} schema: {shown}")
        return parsed, request, raw

    def _reply_object(self, response: httpx.Response, request: dict[str, Any]) -> dict:
        """The endpoint's reply as a JSON object; LLMError when it is not JSON or not an object."""
        try:
            raw = response.json()
        except ValueError:
            raise LLMError(
                f"the model endpoint {self.host} answered with something other than JSON",
                request=request,
                response=response.text[:ERROR_BODY_CHARS],
            ) from None
        if not isinstance(raw, dict):
            raise LLMError("the model endpoint's reply is not a JSON object", request=request)
        return raw

    def _answer_content(self, raw: dict, fail: Callable[[str], LLMError]) -> str:
        """The first choice's message text; raises `fail(...)` when there is no choice, the
        answer was cut off at `max_tokens`, the model refused, or the text is empty."""
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise fail("the model endpoint's reply has no choices")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        if choice.get("finish_reason") == "length":
            raise fail(
                f"the model's answer was truncated at max_tokens ({self.max_tokens}) "
                "before its JSON was complete"
            )
        if message.get("refusal"):
            raise fail(f"the model refused: {str(message['refusal'])[:ERROR_BODY_CHARS]}")
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise fail("the model returned an empty answer")
        return content
