"""The dispatcher's duty (docs/reliability.md "When an attempt may still reach the provider"), against
the real built ledger and the example invoice provider: a dispatcher that stood still between its
grant and its call past the window the ledger granted does not call, and says so with a
CALL_WINDOW_PASSED envelope; the window it declares is the one the ledger grants; the worker renews
a lease it has counted a third gone before it dispatches. The provider counts create requests per
operation_ref, so a call that should not have happened shows as one.

A pause is a jump of ``time.monotonic()`` (what a GC pause or a VM stop looks like to the process),
or the process really standing still on an event while another dispatcher goes on."""

import http.client
import threading
import time
import unittest
import uuid
from typing import Any, Callable, Dict, List
from unittest import mock

from tests.loopback import RawServer, read_request
from tests.support import NOW, context, services, shape, wait_until

from invoice_tools import InvoiceTools
from recovery_ledger import (
    LedgerClient,
    LedgerNotFound,
    LedgerWorker,
    Tool,
    WriteStep,
    call_http_tool,
    call_margin_ms,
    execute_write,
    verify,
)
from recovery_ledger.envelope import parse_iso_instant
from recovery_ledger.normalizers import call_window_passed

_REAL_MONOTONIC = time.monotonic


class Clock:
    """``time.monotonic`` with a jump in it: the process stood still for ``seconds``."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return _REAL_MONOTONIC() + self.skipped

    def stand_still(self, seconds: float) -> None:
        self.skipped += seconds


class Pausing:
    """The real client, with the process standing still right after a call of ``method`` returned
    (``pause(answer)`` runs there: a clock jump, or a wait on an event). Every call is noted, in order."""

    def __init__(self, ledger: LedgerClient, method: str, pause: Callable[[Any], None]) -> None:
        self._ledger, self._method, self._pause = ledger, method, pause
        self.calls: List[str] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._ledger, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            answer = real(*args, **kwargs)
            if name == self._method:
                self._pause(answer)
            return answer

        return call


class CallWindowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        running = services()
        cls.ledger = LedgerClient(running.ledger_url, api_key=running.keys["contract"])
        cls.provider = running.provider
        cls.tools = InvoiceTools(running.provider.url, timeout=5)
        cls.run_id = f"run_pywin_{uuid.uuid4().hex[:8]}"

    def step(self, **policy: Any) -> WriteStep[Dict[str, Any]]:
        n = uuid.uuid4().hex[:6]
        return WriteStep(
            operation_ref=f"{self.run_id}/invoice_{n}",
            run_id=self.run_id,
            tool="create_invoice",
            input={"customer_id": f"cus_{n}", "amount_cents": 1234, "currency": "EUR"},
            policy={"max_attempts": 3, "consistency_window_ms": 200, **policy},
        )

    def types(self, ref: str) -> List[str]:
        try:
            return [event["type"] for event in self.ledger.get_events(ref)["events"]]
        except LedgerNotFound:
            return []

    def test_a_dispatcher_that_stood_still_past_its_window_does_not_call_and_says_so(self) -> None:
        step = self.step(dispatch_timeout_ms=1000)
        clock = Clock()
        paused = Pausing(self.ledger, "dispatch_attempt", lambda _: clock.stand_still(3.0))
        with mock.patch.object(time, "monotonic", clock):
            outcome = execute_write(paused, step, self.tools.create_invoice)
        ref = step.operation_ref
        self.assertEqual(self.provider.create_requests(ref), 0)
        self.assertEqual((outcome.kind, outcome.tool_called, outcome.status), ("recorded", False, "retry_scheduled"))
        envelope = outcome.envelope or {}
        self.assertEqual(
            shape(envelope),
            {"ok": False, "code": "CALL_WINDOW_PASSED", "category": "internal", "commit_state": "not_committed",
             "directive": "after_delay", "next_action": "wait_and_retry"},
        )
        self.assertEqual(envelope["retry"]["max_attempts_remaining"], 3)
        self.assertEqual(
            envelope["agent_message"],
            "The call window the ledger granted had passed before the call; the request was not sent. "
            "A new attempt may run after not_before.",
        )
        self.assertEqual(envelope["user_message"], "The request is waiting and will be retried shortly.")
        recorded = [event for event in self.ledger.get_events(ref)["events"] if event["type"] == "EnvelopeRecorded"]
        self.assertEqual([event["data"]["envelope"]["code"] for event in recorded], ["CALL_WINDOW_PASSED"])

        # Nothing was sent, so the next attempt runs after not_before and writes once.
        wait_until(outcome.not_before)
        again = execute_write(self.ledger, step, self.tools.create_invoice)
        self.assertEqual((again.status, again.attempt, again.tool_called), ("succeeded", 2, True))
        self.assertEqual(self.provider.create_requests(ref), 1)

    def test_the_window_declared_is_the_one_granted_and_the_tool_is_given_its_end(self) -> None:
        step = self.step()
        seen: Dict[str, Any] = {}

        def tool(invoice: Dict[str, Any], ctx: Any) -> Any:
            seen["deadline"], seen["at"] = ctx.deadline, time.monotonic()
            return self.tools.create_invoice(invoice, ctx)

        before = time.monotonic()
        outcome = execute_write(self.ledger, step, tool, call_window_ms=4000)
        self.assertEqual((outcome.status, outcome.tool_called), ("succeeded", True))
        dispatched = [event for event in self.ledger.get_events(step.operation_ref)["events"] if event["type"] == "AttemptDispatched"]
        self.assertEqual(dispatched[0]["data"]["call_window_ms"], 4000)
        granted = parse_iso_instant(dispatched[0]["data"]["call_deadline"]) - parse_iso_instant(dispatched[0]["recorded_at"])
        self.assertEqual(granted.total_seconds(), 4.0)
        # The end handed to the tool: the window counted from before the dispatch left, less the margin.
        self.assertLessEqual(seen["deadline"], seen["at"] + 4.0 - call_margin_ms(4000) / 1000)
        self.assertGreater(seen["deadline"], before)
        with self.assertRaises(ValueError):
            execute_write(self.ledger, self.step(), tool, call_window_ms=0)

    def test_a_paused_dispatcher_wakes_after_another_retried_and_does_not_call(self) -> None:
        step = self.step()
        ref = step.operation_ref
        woken = threading.Event()
        paused = Pausing(self.ledger, "dispatch_attempt", lambda _: woken.wait(30))
        first: Dict[str, Any] = {}
        sleeper = threading.Thread(
            target=lambda: first.update(outcome=execute_write(paused, step, self.tools.create_invoice, call_window_ms=300)),
            daemon=True,
        )
        sleeper.start()
        try:
            # The other dispatcher finds the attempt silent and verifies it: not_found becomes
            # conclusive a consistency window after the call deadline, and it writes.
            deadline = time.time() + 20
            while self.types(ref).count("AttemptDispatched") < 1 and time.time() < deadline:
                time.sleep(0.02)
            checked = verify(self.ledger, ref, self.tools.lookup)
            while checked.kind == "refused" and checked.not_before and time.time() < deadline:
                wait_until(checked.not_before)
                checked = verify(self.ledger, ref, self.tools.lookup)
            self.assertEqual((checked.outcome, checked.status), ("not_found", "retry_ready"))
            second = execute_write(self.ledger, step, self.tools.create_invoice)
            self.assertEqual((second.status, second.attempt), ("succeeded", 2))
        finally:
            woken.set()
            sleeper.join(30)
        outcome = first["outcome"]
        self.assertFalse(outcome.tool_called)
        self.assertEqual((outcome.envelope or {}).get("code"), "CALL_WINDOW_PASSED")
        self.assertEqual(self.provider.create_requests(ref), 1)
        self.assertEqual(len(self.provider.invoices(ref)), 1)
        # Its envelope came late: kept as evidence, not a possible duplicate (nothing was sent).
        self.assertEqual(outcome.refusal.code if outcome.refusal else None, "ATTEMPT_MISMATCH")
        state = self.ledger.get_operation(ref)
        self.assertEqual(state["status"], "succeeded")
        self.assertNotIn("possible_duplicate", state)
        self.assertIn("LateOutcomeRecorded", self.types(ref))

    def test_a_worker_that_stood_still_after_taking_an_item_renews_its_lease_before_dispatching(self) -> None:
        n = uuid.uuid4().hex[:6]
        ref = f"{self.run_id}/feed_{n}"
        clock = Clock()
        # Standing still longer than the whole lease, by the worker's own clock; the ledger still
        # has the lease on the item (no real time went by), so the renewal is granted.
        paused = Pausing(self.ledger, "work", lambda answer: clock.stand_still(5.0) if answer.get("items") else None)
        events: List[Dict[str, Any]] = []
        stop = threading.Event()
        worker = LedgerWorker(
            paused, tools={"create_invoice": Tool(call=self.tools.create_invoice, lookup=self.tools.lookup)},
            stop_event=stop, worker_id=f"py-win-{n}", lease_ms=3000, wait_ms=500, on_event=events.append,
        )
        with mock.patch.object(time, "monotonic", clock):
            thread = threading.Thread(target=worker.run, daemon=True)
            thread.start()
            try:
                self.ledger.start_step(ref, run_id=self.run_id, tool="create_invoice",
                                       input={"customer_id": f"cus_{n}", "amount_cents": 77, "currency": "EUR"},
                                       policy={"max_attempts": 3, "consistency_window_ms": 200})
                deadline = time.time() + 20
                while self.ledger.get_operation(ref)["status"] != "succeeded" and time.time() < deadline:
                    time.sleep(0.05)
            finally:
                stop.set()
                thread.join(15)
        self.assertEqual(self.ledger.get_operation(ref)["status"], "succeeded", events)
        self.assertEqual(self.provider.create_requests(ref), 1)
        moves = [name for name in paused.calls if name in ("renew_lease", "dispatch_attempt")]
        self.assertEqual(moves[:2], ["renew_lease", "dispatch_attempt"], events)
        # The window declared is what the renewed lease leaves, by the worker's own clock.
        dispatched = [event for event in self.ledger.get_events(ref)["events"] if event["type"] == "AttemptDispatched"]
        self.assertTrue(0 < dispatched[0]["data"]["call_window_ms"] <= 3000, dispatched[0]["data"])

    def test_a_worker_that_stood_still_past_its_lease_while_another_took_the_item_dispatches_nothing(self) -> None:
        n = uuid.uuid4().hex[:6]
        ref = f"{self.run_id}/feed_{n}"
        holding, woken = threading.Event(), threading.Event()

        def stand_still(answer: Any) -> None:
            if answer.get("items"):
                holding.set()
                woken.wait(30)

        # Really standing still, between taking the item and starting on it, until the other worker,
        # handed the item once the lease ran out, has driven the step to its end.
        paused = Pausing(self.ledger, "work", stand_still)
        tool = Tool(call=self.tools.create_invoice, lookup=self.tools.lookup)
        sleeper_events: List[Dict[str, Any]] = []
        other_events: List[Dict[str, Any]] = []
        stops = [threading.Event(), threading.Event()]
        sleeper = LedgerWorker(paused, tools={"create_invoice": tool}, stop_event=stops[0], worker_id=f"py-sleeper-{n}",
                               lease_ms=1000, wait_ms=500, on_event=sleeper_events.append)
        threads = [threading.Thread(target=sleeper.run, daemon=True)]
        threads[0].start()
        try:
            self.ledger.start_step(ref, run_id=self.run_id, tool="create_invoice",
                                   input={"customer_id": f"cus_{n}", "amount_cents": 88, "currency": "EUR"},
                                   policy={"max_attempts": 3, "consistency_window_ms": 200})
            deadline = time.time() + 20
            self.assertTrue(holding.wait(20), "the sleeper never took the item")
            other = LedgerWorker(self.ledger, tools={"create_invoice": tool}, stop_event=stops[1], worker_id=f"py-other-{n}",
                                 lease_ms=1000, wait_ms=500, on_event=other_events.append)
            threads.append(threading.Thread(target=other.run, daemon=True))
            threads[1].start()
            while self.ledger.get_operation(ref)["status"] != "succeeded" and time.time() < deadline:
                time.sleep(0.05)
            woken.set()
            while not [e for e in sleeper_events if e.get("operation_ref") == ref and e["type"] in ("lease_lost", "recorded")] and time.time() < deadline:
                time.sleep(0.05)
        finally:
            woken.set()
            for stop in stops:
                stop.set()
            for thread in threads:
                thread.join(15)
        took_over = [e for e in other_events if e["type"] == "item" and e["operation_ref"] == ref]
        self.assertEqual([e.get("took_over_from") for e in took_over], [f"py-sleeper-{n}"], other_events)
        self.assertEqual([e["type"] for e in sleeper_events if e.get("operation_ref") == ref], ["item", "lease_lost"], sleeper_events)
        self.assertNotIn("dispatch_attempt", paused.calls)
        self.assertEqual(self.provider.create_requests(ref), 1)


class HttpToolDeadlineTest(unittest.TestCase):
    """``call_http_tool(deadline=)`` against loopback servers: the request is not sent after the
    deadline, and one in progress is cut off at it."""

    def test_a_deadline_already_passed_sends_nothing(self) -> None:
        server = RawServer(lambda connection: server.received.append(read_request(connection)))
        self.addCleanup(server.close)
        envelope = call_http_tool(f"{server.url}/invoices", body={"a": 1}, operation_ref=context().operation_ref,
                                  side_effect="write", now=lambda: NOW, deadline=time.monotonic() - 0.001)
        self.assertEqual(envelope, call_window_passed(context()))
        self.assertEqual(server.received, [])

    def test_a_request_still_open_at_the_deadline_is_cut_off_as_an_unknown_outcome(self) -> None:
        let_go = threading.Event()
        self.addCleanup(let_go.set)
        swallowed: List[bytes] = []
        created = b'{"id":"inv_1"}'
        answer = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(created), created)

        def slow(connection: Any) -> None:
            swallowed.append(read_request(connection))
            let_go.wait(3)  # a provider that commits and answers after the window's end
            connection.sendall(answer)

        server = RawServer(slow)
        self.addCleanup(server.close)
        # The socket timeout would let the answer come; the deadline ends the call before it.
        envelope = call_http_tool(f"{server.url}/invoices", body={"a": 1}, operation_ref=context().operation_ref,
                                  side_effect="write", now=lambda: NOW, timeout=60, deadline=time.monotonic() + 0.5)
        self.assertEqual(shape(envelope).get("code"), "OUTCOME_UNKNOWN", envelope)
        self.assertEqual(len(swallowed), 1)

    def test_a_pause_between_building_the_request_and_its_first_byte_sends_nothing(self) -> None:
        # The window is checked again in ``send``, right before ``sendall``: a process that stood
        # still after the check on connect and before the request's first byte does not write.
        server = RawServer(lambda connection: server.received.append(read_request(connection)))
        self.addCleanup(server.close)
        deadline = time.monotonic() + 0.3
        real_endheaders = http.client.HTTPConnection.endheaders

        def stand_still_then_send(connection: http.client.HTTPConnection, *args: Any, **kwargs: Any) -> None:
            time.sleep(max(0.0, deadline - time.monotonic()) + 0.05)
            real_endheaders(connection, *args, **kwargs)

        with mock.patch.object(http.client.HTTPConnection, "endheaders", stand_still_then_send):
            envelope = call_http_tool(f"{server.url}/invoices", body={"a": 1}, operation_ref=context().operation_ref,
                                      side_effect="write", now=lambda: NOW, timeout=60, deadline=deadline)
        self.assertEqual(envelope, call_window_passed(context()))
        time.sleep(0.1)  # a request that left would be read by now; the server only saw a connection close
        self.assertEqual([request for request in server.received if request], [])

    def test_the_call_deadline_goes_to_the_provider_as_a_header(self) -> None:
        created = b'{"id":"inv_1"}'
        answer = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(created), created)

        def answering(connection: Any) -> None:
            server.received.append(read_request(connection))
            connection.sendall(answer)

        server = RawServer(answering)
        self.addCleanup(server.close)
        envelope = call_http_tool(f"{server.url}/invoices", body={"a": 1}, operation_ref=context().operation_ref,
                                  side_effect="write", now=lambda: NOW, deadline=time.monotonic() + 5,
                                  call_deadline="2026-12-06T10:00:00.000Z")
        self.assertTrue(envelope["ok"], envelope)
        self.assertIn(b"\r\nLedger-Call-Deadline: 2026-12-06T10:00:00.000Z\r\n", server.received[0])


if __name__ == "__main__":
    unittest.main()
