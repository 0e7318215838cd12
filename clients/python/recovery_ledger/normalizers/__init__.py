"""Normalizers: what providers return (HTTP answers, raised network errors, MCP tool results) to
envelopes, never passing upstream text on to a model."""

from .builders import (
    CALL_WINDOW_RETRY_DELAY_MS,
    DEFAULT_INPUT_FIX_ATTEMPTS,
    DEFAULT_MAX_RETRY_DELAY_MS,
    DEFAULT_RETRY_ATTEMPTS,
    DEFAULT_RETRY_DELAY_MS,
    NORMALIZED_CODE_FACTS,
    NormalizeContext,
    NormalizedCode,
    agent_message,
    call_window_passed,
    user_message,
)
from .http_response import HttpResponse, body_says_failure, normalize_http_response
from .input_fields import input_fields_of
from .mcp_result import normalize_mcp_tool_result
from .network_error import (
    NetworkErrorClassification,
    NetworkFailureKind,
    SendPhase,
    classify_network_error,
    normalize_network_error,
)
from .retry_after import header_value, retry_after_ms
from .upstream_text import SAFE_TOKEN_PATTERN, safe_token, safe_token_list, upstream_error

__all__ = [
    "CALL_WINDOW_RETRY_DELAY_MS",
    "call_window_passed",
    "DEFAULT_INPUT_FIX_ATTEMPTS",
    "DEFAULT_MAX_RETRY_DELAY_MS",
    "DEFAULT_RETRY_ATTEMPTS",
    "DEFAULT_RETRY_DELAY_MS",
    "NORMALIZED_CODE_FACTS",
    "NormalizeContext",
    "NormalizedCode",
    "agent_message",
    "user_message",
    "HttpResponse",
    "body_says_failure",
    "normalize_http_response",
    "input_fields_of",
    "normalize_mcp_tool_result",
    "NetworkErrorClassification",
    "NetworkFailureKind",
    "SendPhase",
    "classify_network_error",
    "normalize_network_error",
    "header_value",
    "retry_after_ms",
    "SAFE_TOKEN_PATTERN",
    "safe_token",
    "safe_token_list",
    "upstream_error",
]
