"""Upstream text never becomes an instruction: the shared hostile corpus (test/vectors/
injection-corpus.json, the TypeScript normalizer tests' own) through every normalizer, and through
call_http_tool against a loopback server that answers with it."""

import errno
import json
import re
import socket
import urllib.error

from tests.loopback import ScriptedHttpServer
from tests.support import FIXED_AGENT_MESSAGES, FIXED_USER_MESSAGES, REF, EnvelopeAssertions, context, dumps, load_vectors

from recovery_ledger import (
    HttpResponse,
    call_http_tool,
    normalize_http_response,
    normalize_mcp_tool_result,
    normalize_network_error,
)

CORPUS = load_vectors("injection-corpus.json")
HOSTILE = CORPUS["hostile_texts"]
TELLTALES = CORPUS["telltales"]
STATUSES = (400, 401, 403, 404, 409, 412, 422, 429, 500, 502, 503, 504)


def as_code(text: str) -> str:
    """The text as an UPPER_SNAKE_CASE code, the one form in which it could pass as a code."""
    return re.sub(r"[^A-Z0-9]+", "_", text.upper()).strip("_")[:64].strip("_") or "X"


def mcp_envelope(text: str, code: str):
    return {
        "ok": False,
        "code": code,
        "category": "dependency",
        "commit_state": "not_committed",
        "retry": {"directive": "never", "max_attempts_remaining": 0},
        "next_action": "escalate",
        "operation_ref": REF,
        "safe_details": {"field": text[:200]},
        "agent_message": text[:400],
        "user_message": text[:400],
    }


class HostileError(Exception):
    """An adapter's own error that carries upstream text in every attribute it has."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.code = text
        self.errno = text
        self.reason = text


def channels(text: str, side_effect: str):
    ctx = context(side_effect)
    json_body = {"message": text, "detail": text, "error": {"message": text, "code": text, "type": text, "field": text, "param": text}}
    for status in STATUSES:
        yield f"HTTP {status} JSON", normalize_http_response(
            HttpResponse(status, headers={"retry-after": text}, body=json_body), ctx, input_fields=["customer_id"]
        )
        yield f"HTTP {status} text", normalize_http_response(HttpResponse(status, body=text), ctx)
    yield "HTTP 200 failure body", normalize_http_response(HttpResponse(200, body={"ok": False, **json_body}), ctx)
    yield "MCP isError text", normalize_mcp_tool_result({"content": [{"type": "text", "text": text}], "isError": True}, ctx)
    yield "MCP envelope prose", normalize_mcp_tool_result(
        {"content": [{"type": "text", "text": text}], "isError": True, "structuredContent": mcp_envelope(text, "PROVIDER_REFUSED")}, ctx
    )
    yield "MCP envelope prose, code vouched", normalize_mcp_tool_result(
        {"content": [], "isError": True, "structuredContent": mcp_envelope(text, "PROVIDER_REFUSED")},
        ctx,
        allowed_codes=["PROVIDER_REFUSED"],
        input_fields=["customer_id"],
    )
    yield "MCP envelope whose code is the text", normalize_mcp_tool_result(
        {"content": [], "isError": True, "structuredContent": {"envelope": mcp_envelope(text, as_code(text))}}, ctx
    )
    cause = OSError(text)
    adapter = HostileError(text)
    adapter.__cause__ = cause
    for error in (adapter, OSError(text), ConnectionResetError(errno.ECONNRESET, text), urllib.error.URLError(text),
                  urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, text)), TimeoutError(text)):
        yield f"network error {type(error).__name__}", normalize_network_error(error, ctx)


class InjectionCorpusTest(EnvelopeAssertions):
    def assert_neutral(self, channel: str, envelope, side_effect: str, code_text: str) -> None:
        error = self.assert_error(envelope)
        self.assertIn(error["agent_message"], FIXED_AGENT_MESSAGES, channel)
        self.assertIn(error["user_message"], FIXED_USER_MESSAGES, channel)
        serialized = dumps(envelope)
        for telltale in TELLTALES + [code_text]:
            self.assertNotIn(telltale, serialized, f"{channel} let {telltale!r} through: {serialized[:300]}")
        self.assert_valid(envelope, side_effect)

    def test_every_text_through_every_normalizer(self) -> None:
        self.assertGreaterEqual(len(HOSTILE), 15)
        count = 0
        for side_effect in ("write", "read"):
            for text in HOSTILE:
                for channel, envelope in channels(text, side_effect):
                    count += 1
                    with self.subTest(side_effect=side_effect, channel=channel, text=text[:40]):
                        self.assert_neutral(channel, envelope, side_effect, as_code(text))
        self.assertGreater(count, 1000)

    def test_every_text_from_a_real_http_server(self) -> None:
        statuses = (200, 400, 403, 429, 502)
        script = []
        for _side_effect in ("write", "read"):
            for text in HOSTILE:
                # A header cannot carry a line break; the body carries the text as it is.
                header_text = text.replace("\r", " ").replace("\n", " ")[:200].encode("latin-1", "replace").decode("latin-1")
                for status in statuses:
                    body = {"ok": False, "message": text, "error": {"code": text, "field": text}} if status == 200 else {"error": {"message": text, "code": text, "field": text}}
                    script.append((status, {"Content-Type": "application/json", "Retry-After": header_text}, json.dumps(body).encode("utf-8")))
        server = ScriptedHttpServer(script)
        self.addCleanup(server.close)
        for side_effect in ("write", "read"):
            for text in HOSTILE:
                for status in statuses:
                    envelope = call_http_tool(server.url + "/invoices", body={"customer_id": "cus_1"}, operation_ref=REF,
                                              side_effect=side_effect, timeout=5)
                    with self.subTest(side_effect=side_effect, status=status, text=text[:40]):
                        self.assert_neutral(f"call_http_tool {status}", envelope, side_effect, as_code(text))
        self.assertEqual(len(server.requests), 2 * len(HOSTILE) * len(statuses))
