"""An MCP tool result (the MCP Python SDK's ``CallToolResult``, as a plain dict) to an envelope.

``{"content": [...], "structuredContent": {...}, "isError": bool}``; a pydantic ``CallToolResult``
may be passed as it is (it is read through ``model_dump(by_alias=True)``), and ``None`` stands for
an absent member, as the SDK's ``model_dump()`` writes it.

A remote MCP server is upstream. Its prose is replaced by fixed sentences, only token-shaped details
travel on, and its own error code passes only when the caller vouches for it in ``allowed_codes``:
without that list no upstream code passes at all (it becomes ``UPSTREAM_ERROR``), since a code is
text the tool chose too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..envelope import DEFAULT_ENVELOPE_LIMITS, EnvelopeLimits, SafeDetailValue, ToolEnvelope, ToolError, validate_envelope
from .builders import NormalizeContext, agent_message, escalate, iso_instant, uncertain_outcome, user_message
from .upstream_text import redact_upstream, safe_token, upstream_error

__all__ = ["normalize_mcp_tool_result"]


def _as_mapping(result: Any) -> Any:
    dump = getattr(result, "model_dump", None)
    if callable(dump) and not isinstance(result, Mapping):
        try:
            return dump(by_alias=True)
        except Exception:  # noqa: BLE001 - an object that cannot describe itself is unreadable
            return None
    return result


def _envelope_in(structured: Any) -> Optional[Dict[str, Any]]:
    """An envelope sits in structuredContent itself, or under its ``envelope`` key."""
    if not isinstance(structured, dict):
        return None
    if isinstance(structured.get("ok"), bool):
        return structured
    inner = structured.get("envelope")
    if isinstance(inner, dict) and isinstance(inner.get("ok"), bool):
        return inner
    return None


def _invalid_result(context: NormalizeContext) -> ToolError:
    """An unreadable result: after a write nothing proves either outcome; after a read a person looks."""
    if context.side_effect == "write":
        return uncertain_outcome(context, "TOOL_RESULT_INVALID")
    return escalate(context, "TOOL_RESULT_INVALID", "internal")


def _token_details(details: Mapping[str, SafeDetailValue], input_fields: Optional[Sequence[str]]) -> Dict[str, SafeDetailValue]:
    """Only token-shaped details travel on; free text in a detail is upstream prose in disguise."""
    kept: Dict[str, SafeDetailValue] = {}
    for key, value in details.items():
        if key == "field":
            if isinstance(value, str) and input_fields is not None and value in input_fields:
                kept[key] = value
            continue
        if key == "allowed_values" and isinstance(value, str):
            if all(safe_token(item.strip()) is not None for item in value.split(",")):
                kept[key] = value
            continue
        token = safe_token(value)
        if token is not None:
            kept[key] = token
    return kept


def _sanitize_error(
    envelope: ToolError,
    allowed_codes: Optional[Sequence[str]],
    input_fields: Optional[Sequence[str]],
    trust_messages: bool,
) -> ToolError:
    vouched = allowed_codes is not None and envelope["code"] in allowed_codes
    return {
        **envelope,
        "code": envelope["code"] if vouched else "UPSTREAM_ERROR",
        "safe_details": _token_details(envelope["safe_details"], input_fields),
        "agent_message": envelope["agent_message"]
        if trust_messages
        else agent_message("TOOL_FAILURE_REPORTED" if vouched else "UPSTREAM_ERROR", envelope["next_action"]),
        "user_message": envelope["user_message"] if trust_messages else user_message(envelope["next_action"]),
    }


def _content_summary(content: List[Any]) -> List[Dict[str, Any]]:
    """The text blocks of a result, kept (redacted) as a read's result; other block types by kind only."""
    summary: List[Dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            summary.append({"type": "unknown"})
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            summary.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "resource_link" and isinstance(block.get("uri"), str):
            summary.append({"type": "resource_link", "uri": block["uri"]})
        else:
            summary.append({"type": block["type"] if isinstance(block.get("type"), str) else "unknown"})
    return summary


def normalize_mcp_tool_result(
    result: Any,
    context: NormalizeContext,
    *,
    allowed_codes: Optional[Sequence[str]] = None,
    input_fields: Optional[Sequence[str]] = None,
    trust_messages: bool = False,
    limits: EnvelopeLimits = DEFAULT_ENVELOPE_LIMITS,
) -> ToolEnvelope:
    """An MCP ``CallToolResult`` to an envelope:

    - ``structuredContent`` carrying an envelope is validated (docs/contract.md §2) and used, its
      prose replaced, only token-shaped details kept and its code kept only when in
      ``allowed_codes``; an invalid one, or one whose ``ok`` contradicts ``isError``, is not trusted;
    - ``isError`` with only content blocks is upstream prose: a neutral UPSTREAM_ERROR;
    - success with ``structuredContent`` is a success with that result; success told only in text
      proves nothing for a write (do not infer outcomes from strings), so it is verified.

    ``input_fields``: the call's argument names; a ``field`` detail is kept only when it names one.
    ``trust_messages``: keep the tool's own messages (redacted), for a tool you run yourself.
    """
    data = _as_mapping(result)
    if not isinstance(data, dict):
        return _invalid_result(context)
    content = data.get("content")
    structured = data.get("structuredContent")
    is_error = data.get("isError")
    if content is not None and not isinstance(content, list):
        return _invalid_result(context)
    if content is None and structured is None:
        return _invalid_result(context)
    if is_error is not None and not isinstance(is_error, bool):
        return _invalid_result(context)
    failed = is_error is True

    candidate = _envelope_in(structured)
    if candidate is not None:
        checked = validate_envelope(candidate, operation_ref=context.operation_ref, side_effect=context.side_effect, limits=limits)
        if not checked.ok or checked.envelope is None:
            return _invalid_result(context)
        envelope = checked.envelope
        if failed and envelope["ok"]:
            return _invalid_result(context)
        if envelope["ok"]:
            return envelope
        return _sanitize_error(envelope, allowed_codes, input_fields, trust_messages)

    if failed:
        return upstream_error(context)
    now = iso_instant(context.now)
    if isinstance(structured, dict):
        value, _ = redact_upstream(structured)
        return {"ok": True, "operation_ref": context.operation_ref, "commit_state": "committed", "result": value, "verification": {"checked_at": now}}
    if context.side_effect == "write":
        return uncertain_outcome(context, "UNVERIFIED_RESULT")
    value, _ = redact_upstream({"content": _content_summary(content if isinstance(content, list) else [])})
    return {"ok": True, "operation_ref": context.operation_ref, "commit_state": "committed", "result": value, "verification": {"checked_at": now}}
