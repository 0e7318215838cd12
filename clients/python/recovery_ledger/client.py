"""The ledger's HTTP API (docs/contract.md §9) for Python runtimes, on the standard library.

Submits are idempotent by construction: each fact's ``event_id`` is fixed before the first send, so
when the client resends after a timeout or a dropped connection the ledger sees the same fact again
and appends nothing new. That is what makes the client's own bounded retries safe.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import time
import urllib.parse
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ._http import BodyTooLarge, read_body
from .api_types import (
    ApprovalRecordedData,
    AttemptDispatchedData,
    EnvelopeRecordedData,
    OperationEvents,
    OperationState,
    RecoveryItem,
    RecoveryPage,
    StepPlannedData,
    StepPolicy,
    SubmitAnswer,
    SubmittedEvent,
    VerificationRecordedData,
)
from .canonical_json import input_hash
from .errors import LedgerError, LedgerInvalidRequest, LedgerUnavailable, ledger_error_from_answer
from .normalizers.retry_after import retry_after_ms

__all__ = ["LedgerClient", "operation_path"]

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z", re.IGNORECASE)
_RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
_MAX_RECOVERY_PAGES = 10_000
_MAX_ANSWER_BYTES = 64 * 1024 * 1024

TraceValue = Union[str, Callable[[], Optional[str]], None]


def operation_path(operation_ref: str) -> str:
    """The ref is one path segment: ``run_81/step_4`` travels as ``run_81%2Fstep_4``."""
    return "/v1/operations/" + urllib.parse.quote(operation_ref, safe="")


def _query(pairs: Mapping[str, Any]) -> str:
    kept = [(name, _query_value(value)) for name, value in pairs.items() if value is not None]
    return "" if not kept else "?" + urllib.parse.urlencode(kept)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Transport(Exception):
    """One try that got no answer; ``timed_out`` tells a timeout from a connection failure."""

    def __init__(self, timed_out: bool) -> None:
        super().__init__("timeout" if timed_out else "unreachable")
        self.timed_out = timed_out


class LedgerClient:
    """A client for one ledger.

    ``timeout``, ``retry_base_delay`` and ``max_retry_delay`` are seconds (Python's socket
    convention); fields of the contract keep the contract's units (``older_than_ms``).

    - ``timeout``: per socket operation of a try (connect, send, each read), default 10 s;
    - ``max_retries``: tries after the first, for transport failures and 429/502/503/504 (default 3);
    - ``retry_base_delay``: first backoff without Retry-After; doubles per try, with jitter (0.2 s);
    - ``max_retry_delay``: the longest wait the client takes on its own; a longer Retry-After is not
      slept through, the error is raised with ``retry_after_seconds`` for the caller's scheduler (5 s);
    - ``traceparent`` / ``tracestate``: W3C trace context for every request (or a function that
      reads the current span's);
    - ``sleep`` and ``new_event_id``: injectable for tests.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: Optional[str] = None,
        timeout: float = 10.0,
        max_retries: int = 3,
        retry_base_delay: float = 0.2,
        max_retry_delay: float = 5.0,
        traceparent: TraceValue = None,
        tracestate: TraceValue = None,
        sleep: Callable[[float], None] = time.sleep,
        new_event_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url.rstrip("/"))
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url[:80]!r}")
        self._scheme = parsed.scheme
        self._host = parsed.hostname
        self._port = parsed.port
        self._prefix = parsed.path.rstrip("/")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._retry_base_delay = retry_base_delay
        self._max_retry_delay = max_retry_delay
        self._traceparent = traceparent
        self._tracestate = tracestate
        self._sleep = sleep
        self._new_event_id = new_event_id

    def new_event_id(self) -> str:
        """A fresh event id, for a caller that wants to hold on to it before submitting."""
        return self._new_event_id()

    # ---- submit facts -----------------------------------------------------------------------------

    def submit(
        self,
        operation_ref: str,
        events: Sequence[SubmittedEvent],
        *,
        expected_revision: Optional[int] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
        timeout: Optional[float] = None,
        lease: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> SubmitAnswer:
        """Submits facts to one operation. Ids are assigned here, before the first send; every resend
        carries the very same body, and its answer is the first answer with results ``duplicate``.
        ``lease`` is the work-feed lease the facts are submitted under (sent as ``Ledger-Lease`` and
        recorded as evidence of who acted; a stale one never refuses a fact). ``idempotency_key`` is
        sent as ``Idempotency-Key`` (draft-ietf-httpapi-idempotency-key-header); one is made per call
        when it is absent, so every resend of that call carries the same key, and a resend whose first
        answer was lost gets that answer replayed."""
        body: Dict[str, Any] = {"events": [self._with_event_id(event) for event in events]}
        if expected_revision is not None:
            body = {"expected_revision": expected_revision, **body}
        path = operation_path(operation_ref) + "/events"
        key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
        return cast(SubmitAnswer, self._request("POST", path, body, traceparent, tracestate, timeout, lease, key))

    def start_step(
        self,
        operation_ref: str,
        *,
        run_id: str,
        tool: str,
        input: Any,  # noqa: A002 - the contract's field name
        side_effect: str = "write",
        policy: Optional[StepPolicy] = None,
        **options: Any,
    ) -> SubmitAnswer:
        """Plans a step with its input, so a worker on the work feed can run it: the ledger then owns
        when it is due (at once, after a retry's not_before, or for verification)."""
        data: Dict[str, Any] = {"run_id": run_id, "tool": tool, "side_effect": side_effect, "input_hash": input_hash(input), "input": input}
        if policy:
            data["policy"] = policy
        return self.plan_step(operation_ref, cast(StepPlannedData, data), **options)

    def plan_step(self, operation_ref: str, data: StepPlannedData, **options: Any) -> SubmitAnswer:
        return self._submit_one(operation_ref, "StepPlanned", data, options)

    def dispatch_attempt(self, operation_ref: str, data: AttemptDispatchedData, **options: Any) -> SubmitAnswer:
        """The gate: a ``LedgerRefusal`` means the tool must not be called. ``data`` may declare
        ``call_window_ms``; a grant answers the attempt's ``call_deadline`` and ``since`` in its state,
        the window the call must end in (``run_attempt`` holds it; docs/contract.md §4.5)."""
        return self._submit_one(operation_ref, "AttemptDispatched", data, options)

    def record_envelope(self, operation_ref: str, data: EnvelopeRecordedData, **options: Any) -> SubmitAnswer:
        return self._submit_one(operation_ref, "EnvelopeRecorded", data, options)

    def record_verification(self, operation_ref: str, data: VerificationRecordedData, **options: Any) -> SubmitAnswer:
        return self._submit_one(operation_ref, "VerificationRecorded", data, options)

    def record_approval(self, operation_ref: str, data: ApprovalRecordedData, **options: Any) -> SubmitAnswer:
        return self._submit_one(operation_ref, "ApprovalRecorded", data, options)

    # ---- reads -------------------------------------------------------------------------------------

    def get_operation(self, operation_ref: str, **options: Any) -> OperationState:
        """The step's state folded from its own stream (strongly consistent)."""
        return cast(OperationState, self._get(operation_path(operation_ref), options))

    def get_events(self, operation_ref: str, *, as_of_revision: Optional[int] = None, **options: Any) -> OperationEvents:
        return cast(OperationEvents, self._get(operation_path(operation_ref) + "/events" + _query({"as_of_revision": as_of_revision}), options))

    def get_evidence(self, operation_ref: str, **options: Any) -> Dict[str, Any]:
        """The evidence trail (a projection): every attempt, envelope, refusal, verification, transition."""
        path = operation_path(operation_ref) + "/evidence"
        return cast(Dict[str, Any], self._get(path + self._projection_query(options), options))

    def get_run(self, run_id: str, *, status: Optional[str] = None, tool: Optional[str] = None, **options: Any) -> Dict[str, Any]:
        path = "/v1/runs/" + urllib.parse.quote(run_id, safe="")
        return cast(Dict[str, Any], self._get(path + self._projection_query(options, {"status": status, "tool": tool}), options))

    def list_recovery(
        self,
        *,
        older_than_ms: Optional[int] = None,
        tool: Optional[str] = None,
        status: Optional[str] = None,
        **options: Any,
    ) -> RecoveryPage:
        """One page of operations in ``dispatched`` or ``verifying``, oldest first."""
        extra = {"older_than_ms": older_than_ms, "tool": tool, "status": status}
        return cast(RecoveryPage, self._get("/v1/recovery" + self._projection_query(options, extra), options))

    def recovery_items(self, **query: Any) -> Iterator[RecoveryItem]:
        """Every page of the recovery list, followed by its cursor until the ledger gives none."""
        seen = set()
        cursor: Optional[str] = None
        for _ in range(_MAX_RECOVERY_PAGES):
            page = self.list_recovery(**{**query, "cursor": cursor})
            yield from page.get("items") or []
            next_cursor = page.get("next_cursor")
            # A cursor seen twice would page forever; the list is then as complete as it will get.
            if not next_cursor or next_cursor in seen:
                return
            seen.add(next_cursor)
            cursor = next_cursor

    # ---- the work feed -----------------------------------------------------------------------------

    def work(
        self,
        *,
        worker: str,
        tools: Sequence[str] = (),
        limit: Optional[int] = None,
        wait_ms: Optional[int] = None,
        lease_ms: Optional[int] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """Due work, each item under a lease to ``worker`` (a long poll of up to ``wait_ms``)."""
        pairs: List[Tuple[str, str]] = [("worker", worker)] + [("tool", tool) for tool in tools]
        for name, value in (("limit", limit), ("wait_ms", wait_ms), ("lease_ms", lease_ms)):
            if value is not None:
                pairs.append((name, str(value)))
        # Each socket read outlives the long poll it asked for.
        timeout = options.get("timeout") or max(self._timeout, (wait_ms or 0) / 1000 + 10)
        path = "/v1/work?" + urllib.parse.urlencode(pairs)
        return cast(Dict[str, Any], self._request("GET", path, None, options.get("traceparent"), options.get("tracestate"), timeout))

    def renew_lease(self, operation_ref: str, lease_id: str, lease_ms: Optional[int] = None, **options: Any) -> Dict[str, Any]:
        """Extends a lease; ``LedgerError`` LEASE_LOST (409) when it no longer holds the item."""
        body: Dict[str, Any] = {"lease_id": lease_id}
        if lease_ms is not None:
            body["lease_ms"] = lease_ms
        return self._post(operation_path(operation_ref) + "/lease/renew", body, options)

    def release_lease(self, operation_ref: str, lease_id: str, hold_ms: Optional[float] = None, **options: Any) -> Dict[str, Any]:
        """Gives a lease back; with ``hold_ms`` the item stays with no one that long."""
        body: Dict[str, Any] = {"lease_id": lease_id}
        if hold_ms is not None:
            body["hold_ms"] = max(0, round(hold_ms))
        return self._post(operation_path(operation_ref) + "/lease/release", body, options)

    def get_trust_metrics(self, *, tool: Optional[str] = None, **options: Any) -> Dict[str, Any]:
        return cast(Dict[str, Any], self._get("/v1/metrics/trust" + self._projection_query(options, {"tool": tool}), options))

    def get_envelope_schema(self, **options: Any) -> Dict[str, Any]:
        """The envelope's JSON Schema."""
        return cast(Dict[str, Any], self._get("/v1/schema/envelope", options))

    # ---- transport ---------------------------------------------------------------------------------

    @staticmethod
    def _projection_query(options: Dict[str, Any], extra: Optional[Mapping[str, Any]] = None) -> str:
        """Projections may lag the log: ``wait_for_position`` (a submit's ``position``) asks the
        ledger to answer only once it has applied the log that far (read-your-writes)."""
        pairs = dict(extra or {})
        for name in ("cursor", "limit", "wait_for_position", "wait_timeout_ms"):
            pairs[name] = options.pop(name, None)
        return _query(pairs)

    def _get(self, path: str, options: Dict[str, Any]) -> Any:
        return self._request("GET", path, None, options.get("traceparent"), options.get("tracestate"), options.get("timeout"))

    def _post(self, path: str, body: Any, options: Dict[str, Any]) -> Any:
        return self._request("POST", path, body, options.get("traceparent"), options.get("tracestate"), options.get("timeout"))

    def _submit_one(self, operation_ref: str, fact_type: str, data: Any, options: Dict[str, Any]) -> SubmitAnswer:
        event: Dict[str, Any] = {"type": fact_type, "data": data}
        event_id = options.pop("event_id", None)
        if event_id is not None:
            event["event_id"] = event_id
        return self.submit(operation_ref, [event], **options)  # type: ignore[list-item]

    def _with_event_id(self, event: Mapping[str, Any]) -> Dict[str, Any]:
        event_id = event.get("event_id") or self._new_event_id()
        if not isinstance(event_id, str) or not _UUID.match(event_id):
            raise LedgerInvalidRequest(
                code="BAD_REQUEST",
                status=400,
                detail=f'event_id must be a UUID, got "{str(event_id)[:40]}"',
                field="events[].event_id",
            )
        return {"event_id": event_id, **{k: v for k, v in event.items() if k != "event_id"}}

    def _headers(
        self,
        has_body: bool,
        traceparent: Optional[str],
        tracestate: Optional[str],
        lease: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Dict[str, str]:
        def read(value: TraceValue) -> Optional[str]:
            return value() if callable(value) else value

        headers = {"Accept": "application/json, application/problem+json"}
        if has_body:
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        parent = traceparent or read(self._traceparent)
        state = tracestate or read(self._tracestate)
        if parent:
            headers["traceparent"] = parent
        if state:
            headers["tracestate"] = state
        if lease:
            headers["Ledger-Lease"] = lease
        if idempotency_key:
            # An sf-string (RFC 8941), as the draft defines the field.
            headers["Idempotency-Key"] = '"' + re.sub(r'(["\\])', r"\\\1", idempotency_key) + '"'
        return headers

    def _backoff(self, retry: int) -> float:
        """"Equal jitter": half fixed, half random, so retrying workers spread out."""
        ceiling = min(self._max_retry_delay, self._retry_base_delay * 2.0**retry)
        return ceiling / 2 + random.random() * (ceiling / 2)

    def _request(
        self,
        method: str,
        path: str,
        body: Any,
        traceparent: Optional[str],
        tracestate: Optional[str],
        timeout: Optional[float],
        lease: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Any:
        """One request with bounded retries. The serialized body is fixed once, so a resend is byte
        for byte the first send. Retried: no answer, and 429/502/503/504, honouring Retry-After up
        to ``max_retry_delay``. Not retried: any other answer, which is the ledger's decision."""
        payload = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
        headers = self._headers(payload is not None, traceparent, tracestate, lease, idempotency_key)
        seconds = self._timeout if timeout is None else timeout
        last: Optional[LedgerError] = None
        for retry in range(self._max_retries + 1):
            if retry > 0 and last is not None:
                wait = self._backoff(retry - 1) if last.retry_after_seconds is None else float(last.retry_after_seconds)
                if wait > self._max_retry_delay:
                    raise last
                self._sleep(wait)
            try:
                status, answer_headers, parsed = self._send(method, self._prefix + path, headers, payload, seconds)
            except _Transport as failure:
                last = LedgerUnavailable(
                    code="LEDGER_TIMEOUT" if failure.timed_out else "LEDGER_UNREACHABLE",
                    status=0,
                    detail=f"no answer from the ledger within {seconds} s"
                    if failure.timed_out
                    else "the ledger could not be reached",
                )
                last.__cause__ = failure.__cause__
                continue
            if 200 <= status < 300:
                if parsed is None:
                    raise LedgerError(code="LEDGER_BAD_RESPONSE", status=status, detail="the answer is not JSON")
                return parsed
            advised = retry_after_ms(answer_headers.get("retry-after"), datetime.now(timezone.utc))
            error = ledger_error_from_answer(status, parsed, None if advised is None else -(-advised // 1000))
            if status not in _RETRYABLE_STATUSES:
                raise error
            last = error
        assert last is not None
        raise last

    def _send(
        self, method: str, path: str, headers: Dict[str, str], payload: Optional[bytes], timeout: float
    ) -> Tuple[int, Any, Any]:
        """One try on a fresh connection; transport failures come back as _Transport."""
        connection_class = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        connection = connection_class(self._host, self._port, timeout=timeout)
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            try:
                raw = read_body(response, _MAX_ANSWER_BYTES)
            except BodyTooLarge:
                return response.status, response.headers, None
            try:
                parsed = None if raw == b"" else json.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                parsed = None
            return response.status, response.headers, parsed
        except (OSError, http.client.HTTPException) as error:
            timed_out = isinstance(error, (TimeoutError, socket.timeout))
            raise _Transport(timed_out) from error
        finally:
            connection.close()
