"""An HTTP status and body to an envelope.

Status is transport information; this maps it to workflow information: what is known about the
commit, and what may safely happen next. The same table as the TypeScript SDK's
``normalizeHttpResponse``. 401 and 403 are both authorization, but not the same next step: a 401
says the runtime's own credential is wrong (an operator fixes that: escalate); a 403 says policy
forbids the action (a person with the authority can approve it: request_approval).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ..envelope import STABLE_CODE_PATTERN, ToolEnvelope, ToolError, ToolSuccess
from .builders import (
    NormalizeContext,
    correct_input,
    escalate,
    iso_instant,
    request_approval,
    uncertain_outcome,
    wait_and_retry,
)
from .retry_after import Headers, header_value, retry_after_ms
from .upstream_text import redact_upstream, safe_token, upstream_error

__all__ = ["HttpResponse", "normalize_http_response", "body_says_failure"]


@dataclass(frozen=True)
class HttpResponse:
    """What came back over HTTP: the status, the headers, and the body (parsed JSON, text, or None)."""

    status: int
    headers: Headers = None
    body: Any = None


_FAILURE_STATUS = re.compile(r"^(error|fail|failed|failure)\Z", re.IGNORECASE)
_KEY_IN_USE = re.compile(r"idempoten\w*[_ -]?key[_ -]?(in[_ -]?use|in[_ -]?progress|processing)", re.IGNORECASE | re.ASCII)


def body_says_failure(body: Any) -> bool:
    """The conventions legacy APIs use to report a failure behind a 2xx: ``ok: false``,
    ``success: false``, ``status: "error"``, a non-empty ``error`` or ``errors``. Even a 200 can
    contain an application-level failure, and treating it as success invents a "done"."""
    if not isinstance(body, dict):
        return False
    if body.get("ok") is False or body.get("success") is False:
        return True
    status = body.get("status")
    if isinstance(status, str) and _FAILURE_STATUS.match(status):
        return True
    error = body.get("error", None)
    # Identity, not equality: 0 == False in Python, and JavaScript's `!== false` keeps an error of 0.
    if "error" in body and error is not None and error is not False and error != "":
        return True
    errors = body.get("errors")
    return isinstance(errors, list) and len(errors) > 0


def _upstream_codes(body: Any) -> List[str]:
    """The provider's own error code, wherever the common shapes put it; only ever looked up, never copied."""
    if not isinstance(body, dict):
        return []
    candidates = [body.get("code"), body.get("error_code"), body.get("type")]
    error = body.get("error")
    if isinstance(error, dict):
        candidates += [error.get("code"), error.get("type")]
    if isinstance(error, str):
        candidates.append(error)
    return [value for value in candidates if isinstance(value, str)]


def _mapped_code(body: Any, code_map: Optional[Mapping[str, str]]) -> Optional[str]:
    if not code_map:
        return None
    for code in _upstream_codes(body):
        mapped = code_map.get(code)
        if isinstance(mapped, str) and len(mapped) <= 64 and STABLE_CODE_PATTERN.match(mapped):
            return mapped
    return None


def _invalid_field(body: Any, input_fields: Optional[Sequence[str]]) -> Optional[str]:
    """The invalid field, from the shapes providers use (``field``, Stripe's ``param``, RFC 9457
    ``invalid_params``), reported only when it is one of the input's own fields."""
    if not isinstance(body, dict) or input_fields is None:
        return None
    candidates = [body.get("field"), body.get("param")]
    error = body.get("error")
    if isinstance(error, dict):
        candidates += [error.get("field"), error.get("param")]

    def first(items: Any) -> Optional[Dict[str, Any]]:
        return items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else None

    first_error = first(body.get("errors"))
    if first_error is not None:
        candidates += [first_error.get("field"), first_error.get("param"), first_error.get("path")]
    first_invalid = first(body.get("invalid_params"))
    if first_invalid is not None:
        candidates.append(first_invalid.get("name"))
    for candidate in candidates:
        token = safe_token(candidate)
        if isinstance(token, str) and token in input_fields:
            return token
    return None


def _with_code(envelope: ToolError, code: Optional[str]) -> ToolError:
    """An adapter-vouched code replaces the generic one; every other field stays as the status implies."""
    return envelope if code is None else {**envelope, "code": code}


def _is_key_still_in_use(body: Any) -> bool:
    """"This idempotency key is still being processed" says nothing about the outcome: the first
    request may yet commit. A key reused with other parameters is a plain conflict."""
    return any(_KEY_IN_USE.search(code) for code in _upstream_codes(body))


def normalize_http_response(
    response: HttpResponse,
    context: NormalizeContext,
    *,
    code_map: Optional[Mapping[str, str]] = None,
    input_fields: Optional[Sequence[str]] = None,
    is_failure: Optional[Callable[[Any], bool]] = None,
    result: Optional[Callable[[Any], Any]] = None,
    evidence_ref: Optional[Callable[[Any], Optional[str]]] = None,
) -> ToolEnvelope:
    """HTTP status and body to an envelope.

    ``code_map``: provider error codes the adapter vouches for, mapped to this runtime's stable codes
    (``{"card_declined": "CARD_DECLINED"}``); codes not in it are never copied. ``input_fields``:
    the input's field names (see ``input_fields_of``); without it no ``field`` is reported.
    ``is_failure``, ``result``, ``evidence_ref``: for APIs with their own conventions (a 2xx that
    is a failure, the part of the body kept as the result, the provider's id of the write).
    """
    status, body = response.status, response.body
    is_write = context.side_effect == "write"
    code = _mapped_code(body, code_map)

    def retry_later(normalized: str) -> ToolError:
        return wait_and_retry(context, normalized, retry_after_ms(header_value(response.headers, "retry-after"), context.now))

    if 200 <= status < 300:
        failed = is_failure(body) if is_failure is not None else body_says_failure(body)
        if failed:
            return _with_code(upstream_error(context), code)
        # 202: the provider queued the write; nothing proves it happened yet.
        if status == 202 and is_write:
            return uncertain_outcome(context, "ACCEPTED_NOT_CONFIRMED")
        return _success(body, context, result, evidence_ref)

    if status in (400, 422):
        return _with_code(correct_input(context, "INVALID_INPUT", _invalid_field(body, input_fields)), code)
    if status in (404, 410):
        return _with_code(correct_input(context, "RESOURCE_NOT_FOUND", _invalid_field(body, input_fields)), code)
    if status == 413:
        return _with_code(correct_input(context, "PAYLOAD_TOO_LARGE", None), code)
    if status == 401:
        return _with_code(escalate(context, "UPSTREAM_UNAUTHENTICATED", "authorization"), code)
    if status == 403:
        return _with_code(request_approval(context, "MISSING_APPROVAL"), code)
    if status == 409:
        if is_write and _is_key_still_in_use(body):
            return uncertain_outcome(context)
        return _with_code(escalate(context, "CONFLICT", "conflict"), code)
    if status == 412:
        return _with_code(escalate(context, "VERSION_CONFLICT", "conflict"), code)
    if status == 408:
        # The server gave up waiting for the request itself: it never processed it.
        return _with_code(retry_later("DEPENDENCY_UNAVAILABLE"), code)
    if status == 429:
        # A rate limiter answers before the request is processed: nothing ran, even for a write.
        return _with_code(retry_later("RATE_LIMITED"), code)
    if status == 503:
        # With Retry-After the service says it is not taking requests; without it, a 503 is one more
        # 5xx that a proxy may send while the upstream keeps working.
        if header_value(response.headers, "retry-after") is not None or not is_write:
            return _with_code(retry_later("DEPENDENCY_UNAVAILABLE"), code)
        return uncertain_outcome(context)
    if status >= 500:
        # A 5xx after a write may follow a commit (a proxy's 502 while the upstream keeps working).
        return uncertain_outcome(context) if is_write else _with_code(retry_later("DEPENDENCY_UNAVAILABLE"), code)
    if status >= 400:
        return _with_code(escalate(context, "UPSTREAM_REJECTED", "internal"), code)
    # 1xx/3xx as a final answer: the request went out and nothing says what became of it.
    return uncertain_outcome(context) if is_write else escalate(context, "UPSTREAM_ERROR", "dependency")


def _success(
    body: Any,
    context: NormalizeContext,
    result: Optional[Callable[[Any], Any]],
    evidence_ref: Optional[Callable[[Any], Optional[str]]],
) -> ToolSuccess:
    picked = result(body) if result is not None else body
    value, _ = redact_upstream(picked)
    raw_ref = evidence_ref(body) if evidence_ref is not None else (body.get("id") if isinstance(body, dict) else None)
    evidence = safe_token(raw_ref)
    verification = {"checked_at": iso_instant(context.now)}
    if evidence is not None:
        verification["evidence_ref"] = _js_string(evidence)
    return {
        "ok": True,
        "operation_ref": context.operation_ref,
        "commit_state": "committed",
        "result": value,
        "verification": verification,  # type: ignore[typeddict-item]
    }


def _js_string(value: Any) -> str:
    """``String(value)`` for the scalars a token may be."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        from ..canonical_json import canonical_json

        return canonical_json(value)
    return str(value)
