"""A worker on the ledger's work feed (docs/work-feed.md): the ledger owns the schedule, the worker
plugs in the tools.

It polls the feed for due items of its tools, runs each dispatch item through the gate and calls the
tool with operation_ref as the idempotency key, records the envelope, verifies unknown outcomes with
the tool's lookup while it still holds the item, renews each lease every third of its length and
releases it. It counts each lease on its own monotonic clock: a lease more than a third gone when a
dispatch is due is renewed first (a process that stood still may have lost it), and what is left of
it is declared as the attempt's call window, so the call ends before the lease does
(docs/reliability.md "When an attempt may still reach the provider"). Nothing here waits for
not_before, counts attempts or decides that a silent dispatch is dead: the ledger hands each step
out when it is due.

Threads, since the client is blocking: one polls, ``concurrency`` work items, and one renewal
thread per item in hand. Stopping (``stop_event``) takes no new item and lets items in hand finish;
a blocking call cannot be cut, so a poll already waiting returns within ``wait_ms``, and any item it
brings back after the stop is released untouched.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Callable, Dict, Mapping, Optional

from .envelope import EnvelopeLimits, parse_iso_instant
from .errors import LedgerError
from .execute_write import (
    MAX_CALL_WINDOW_MS,
    AttemptToRun,
    Lookup,
    OutcomeNotRecordedError,
    ToolCall,
    VerifyOutcome,
    WriteOutcome,
    _utc_now,
    call_margin_ms,
    run_attempt,
    verify,
)

__all__ = ["Tool", "WorkerReport", "LedgerWorker"]

WorkerEvent = Dict[str, Any]


@dataclass(frozen=True)
class Tool:
    """What a runtime plugs in per tool: the call (given operation_ref as its idempotency key in its
    ToolCallContext) and the lookup by operation_ref. ``call_window_ms``, when given, is the longest
    a call of this tool stays open (its timeout): declared with each dispatch when it is shorter than
    what is left of the lease, so a worker that dies mid-call leaves an attempt that can be verified
    that much sooner."""

    call: ToolCall[Any]
    lookup: Lookup
    call_window_ms: Optional[int] = None


@dataclass(frozen=True)
class WorkerReport:
    items: int = 0
    dispatched: int = 0
    verified: int = 0
    succeeded: int = 0
    escalated: int = 0
    # Renewals refused: the item went to another worker (the gate still judged what this one sent).
    leases_lost: int = 0
    # Attempts whose envelope could not be recorded: the ledger verifies them after the dispatch timeout.
    left_for_verification: int = 0
    # Items leased by a poll that came back after the stop, given back untouched.
    released_unworked: int = 0
    errors: int = 0


def _iso_ms(instant: str) -> float:
    return parse_iso_instant(instant).timestamp() * 1000


class _HeldLease:
    """A lease as the worker counts it on its own monotonic clock: it ends no later than the instant
    the request that got (or renewed) it was sent plus the length granted, since the ledger started
    the lease after that request left. A pause of the process only makes the count more cautious."""

    def __init__(self, requested_at: float, length_ms: float) -> None:
        self.length_ms = length_ms
        self._ends_at = requested_at + length_ms / 1000
        self._lock = threading.Lock()

    def renewed(self, requested_at: float) -> None:
        with self._lock:
            self._ends_at = max(self._ends_at, requested_at + self.length_ms / 1000)

    @property
    def ends_at(self) -> float:
        with self._lock:
            return self._ends_at

    def remaining_ms(self) -> float:
        return (self.ends_at - time.monotonic()) * 1000

    def stale(self) -> bool:
        """More than a third of it gone: the renewals may have stalled with the process."""
        return self.remaining_ms() < self.length_ms * 2 / 3


class LedgerWorker:
    """``LedgerWorker(client, tools={"create_invoice": Tool(call=..., lookup=...)}, concurrency=4,
    stop_event=threading.Event()).run()`` drives steps to their end until the event is set, then
    returns a ``WorkerReport``. ``on_event`` receives one dict per thing done (``type``: started,
    item, recorded, verified, lease_lost, left_for_verification, released_unworked, error, stopped);
    it is called from the worker's threads."""

    def __init__(
        self,
        ledger: Any,
        *,
        tools: Mapping[str, Tool],
        concurrency: int = 4,
        stop_event: Optional[threading.Event] = None,
        worker_id: Optional[str] = None,
        lease_ms: int = 30_000,
        wait_ms: int = 10_000,
        on_event: Optional[Callable[[WorkerEvent], None]] = None,
        now: Callable[[], datetime] = _utc_now,
        limits: Optional[EnvelopeLimits] = None,
        error_pause: float = 0.5,
    ) -> None:
        if not tools:
            raise ValueError("LedgerWorker needs at least one tool")
        self.ledger = ledger
        self.tools = dict(tools)
        self.concurrency = max(1, int(concurrency))
        self.stop_event = stop_event or threading.Event()
        self.id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.lease_ms = lease_ms
        self.wait_ms = wait_ms
        self._on_event = on_event
        self._now = now
        self._limits = limits
        self._error_pause = error_pause
        self._lock = threading.Lock()
        self._report = WorkerReport()

    def _emit(self, event: WorkerEvent) -> None:
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # noqa: BLE001 - an observer's failure must not leave a step half done
                pass

    def _count(self, **increments: int) -> None:
        with self._lock:
            self._report = replace(self._report, **{name: getattr(self._report, name) + n for name, n in increments.items()})

    @property
    def report(self) -> WorkerReport:
        with self._lock:
            return self._report

    def run(self) -> WorkerReport:
        """Runs until ``stop_event`` is set and the items in hand are done; returns what was done."""
        tools = list(self.tools)
        free = threading.Semaphore(self.concurrency)
        in_hand = [0]
        self._emit({"type": "started", "worker": self.id, "tools": tools, "concurrency": self.concurrency})
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=f"ledger-worker-{self.id}") as pool:

            def done(_: Any) -> None:
                with self._lock:
                    in_hand[0] -= 1
                free.release()

            while not self.stop_event.is_set():
                # Wait for a free slot, looking at the stop now and then.
                if not free.acquire(timeout=0.1):
                    continue
                free.release()
                with self._lock:
                    slots = self.concurrency - in_hand[0]
                # The leases start after this request leaves: the worker's count of each starts here.
                requested_at = time.monotonic()
                try:
                    items = self.ledger.work(worker=self.id, tools=tools, limit=slots, wait_ms=self.wait_ms, lease_ms=self.lease_ms).get("items") or []
                except Exception as error:  # noqa: BLE001 - the feed is retried after a pause, never given up on
                    self._count(errors=1)
                    self._emit({"type": "error", "code": _code(error), "detail": _detail(error)})
                    self.stop_event.wait(self._error_pause)
                    continue
                for item in items:
                    if self.stop_event.is_set():
                        self._give_back(item)
                        continue
                    free.acquire()
                    with self._lock:
                        in_hand[0] += 1
                    pool.submit(self._handle, item, requested_at).add_done_callback(done)
            # Leaving the with-block waits for every item in hand.
        report = self.report
        self._emit({"type": "stopped", "worker": self.id, "report": report})
        return report

    def _give_back(self, item: Mapping[str, Any]) -> None:
        self._count(released_unworked=1)
        self._emit({"type": "released_unworked", "operation_ref": item["operation_ref"]})
        try:
            self.ledger.release_lease(item["operation_ref"], item["lease"]["id"])
        except Exception:  # noqa: BLE001 - an unreleased lease only expires; the gate judges whoever acts
            pass

    def _handle(self, item: Mapping[str, Any], requested_at: float) -> None:
        self._count(items=1)
        ref = item["operation_ref"]
        lease = item["lease"]["id"]
        event: WorkerEvent = {"type": "item", "operation_ref": ref, "kind": item["kind"], "attempt": item["attempt"], "status": item["status"]}
        if item["lease"].get("took_over_from"):
            event["took_over_from"] = item["lease"]["took_over_from"]
        self._emit(event)
        hand = _ItemInHand(self, ref, lease, _HeldLease(requested_at, self._lease_length_ms(item)))

        def renew() -> None:
            while not hand.finished.wait(max(0.25, hand.held.length_ms / 3000)):
                try:
                    if not hand.renew():
                        return
                except Exception:  # noqa: BLE001 - a renewal that got no answer is tried again next time
                    pass

        renewal = threading.Thread(target=renew, name=f"ledger-lease-{ref}", daemon=True)
        renewal.start()
        hold_ms: Optional[float] = None
        release = True
        try:
            hold_ms = self._work(item, hand)
        except OutcomeNotRecordedError as error:
            # The ledger still has the attempt in flight: keep the lease to its end, then the feed
            # hands the step out for verification after its dispatch timeout.
            release = False
            self._count(left_for_verification=1)
            self._emit({"type": "left_for_verification", "operation_ref": ref, "attempt": error.attempt})
        except Exception as error:  # noqa: BLE001 - one item's failure is reported, the worker goes on
            self._count(errors=1)
            self._emit({"type": "error", "operation_ref": ref, "code": _code(error), "detail": _detail(error)})
        finally:
            hand.finished.set()
            renewal.join()
        if release and not hand.lost.is_set():
            try:
                self.ledger.release_lease(ref, lease, hold_ms)
            except Exception:  # noqa: BLE001 - an unreleased lease only expires
                pass

    def _lease_length_ms(self, item: Mapping[str, Any]) -> float:
        """The lease length the worker counts with: what it asks for, within the ledger's cap (the
        step's dispatch timeout)."""
        cap = (item.get("policy") or {}).get("dispatch_timeout_ms")
        return min(self.lease_ms, cap) if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0 else self.lease_ms

    def _work(self, item: Mapping[str, Any], hand: "_ItemInHand") -> Optional[float]:
        """One item's work; returns how long to keep it from everyone (a check that must wait for its window)."""
        tool = self.tools.get(item["tool"])
        if tool is None:
            raise LookupError(f"no tool {item['tool']} in this worker")
        ref = item["operation_ref"]
        lease = hand.lease
        if item["kind"] == "dispatch":
            if "input" not in item:
                # Nothing to call the tool with: say so, and keep the step from being handed round in a loop.
                self._count(errors=1)
                self._emit({"type": "error", "operation_ref": ref, "code": "WORK_ITEM_WITHOUT_INPUT", "detail": "planned without its input; start steps with start_step()"})
                return self.lease_ms
            # A third of the lease gone by this worker's clock: the process may have stood still (GC,
            # a VM stop) while another worker took the item. Ask the ledger before dispatching.
            if hand.held.stale() and not hand.renew():
                return None
            if hand.lost.is_set():
                return None
            remaining = math.floor(hand.held.remaining_ms())
            if remaining <= call_margin_ms(remaining):
                # Too little lease left to start a call in: dispatch nothing; the item goes back.
                self._count(errors=1)
                self._emit({"type": "error", "operation_ref": ref, "code": "LEASE_TOO_SHORT", "detail": f"{remaining} ms of the lease left by this worker's clock"})
                return None
            # The call window declared is what is left of the lease by this worker's clock (or the
            # tool's own, when shorter); run_attempt also holds the call to the lease's end as
            # counted here, whatever the ledger answers.
            window = min(remaining, MAX_CALL_WINDOW_MS, tool.call_window_ms or MAX_CALL_WINDOW_MS)
            outcome = run_attempt(
                self.ledger,
                AttemptToRun(ref, item["attempt"], item["input_hash"], item["input"], item["side_effect"]),
                tool.call,
                now=self._now,
                limits=self._limits,
                verification_tool=item.get("verification_tool"),
                lease=lease,
                call_window_ms=window,
                not_after=hand.held.ends_at,
            )
            self._after_write(outcome)
            # An unknown outcome is checked at once, while this worker still holds the item.
            if outcome.kind != "recorded" or outcome.directive.get("next_action") != "verify_operation":
                return None
        return self._after_verify(verify(self.ledger, ref, tool.lookup, now=self._now, lease=lease))

    def _after_write(self, outcome: WriteOutcome) -> None:
        event: WorkerEvent = {
            "type": "recorded",
            "operation_ref": outcome.operation_ref,
            "attempt": outcome.attempt or 0,
            "status": outcome.status,
            "next_action": outcome.directive.get("next_action"),
            "tool_called": outcome.tool_called,
        }
        if outcome.refusal is not None:
            event["code"] = outcome.refusal.code
        elif outcome.envelope is not None and not outcome.envelope["ok"]:
            event["code"] = outcome.envelope["code"]
        self._emit(event)
        self._count(dispatched=1 if outcome.tool_called else 0, **self._ends(outcome.status))

    def _after_verify(self, verified: VerifyOutcome) -> Optional[float]:
        event: WorkerEvent = {"type": "verified", "operation_ref": verified.operation_ref, "outcome": verified.outcome, "status": verified.status}
        if verified.refusal is not None:
            event["refusal"] = verified.refusal.code
        self._emit(event)
        self._count(verified=1, **self._ends(verified.status))
        # not_found inside the consistency window: nobody may conclude before it ends.
        if verified.kind == "refused" and verified.not_before:
            return max(0.0, _iso_ms(verified.not_before) - time.time() * 1000)
        return None

    @staticmethod
    def _ends(status: str) -> Dict[str, int]:
        return {"succeeded": int(status == "succeeded"), "escalated": int(status == "escalated")}


class _ItemInHand:
    """One leased item while the worker works on it: its lease as counted here, and whether it is lost."""

    def __init__(self, worker: LedgerWorker, ref: str, lease: str, held: _HeldLease) -> None:
        self._worker = worker
        self.ref = ref
        self.lease = lease
        self.held = held
        self.finished = threading.Event()
        self.lost = threading.Event()

    def renew(self) -> bool:
        """Renews the lease; False (said once) when the ledger says it no longer holds the item."""
        requested_at = time.monotonic()
        try:
            self._worker.ledger.renew_lease(self.ref, self.lease, self._worker.lease_ms)
        except LedgerError as error:
            if error.code != "LEASE_LOST":
                raise
            # A renewal still on its way when the release lands is refused: that lease was not lost.
            if not self.finished.is_set() and not self.lost.is_set():
                self.lost.set()
                self._worker._count(leases_lost=1)
                self._worker._emit({"type": "lease_lost", "operation_ref": self.ref})
            return False
        self.held.renewed(requested_at)
        return True


def _code(error: BaseException) -> str:
    return error.code if isinstance(error, LedgerError) else type(error).__name__


def _detail(error: BaseException) -> str:
    # The ledger's own detail, or the exception's type: a tool's or a socket's text is never passed on.
    return error.detail if isinstance(error, LedgerError) else type(error).__name__
