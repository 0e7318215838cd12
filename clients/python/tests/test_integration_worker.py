"""LedgerWorker against the real built ledger's work feed and the example invoice provider, each a
process of its own, over real HTTP. The provider counts create requests per operation_ref, so a step
executed twice would show as two, whatever the provider's idempotency does with them."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
import uuid
from typing import Any, Dict, List

from tests.support import EXAMPLES, services

from invoice_tools import InvoiceTools
from recovery_ledger import LedgerClient, LedgerWorker, Tool

POLICY = {"max_attempts": 3, "consistency_window_ms": 300}


class Running:
    """A worker run on a thread of its own, with its events kept."""

    def __init__(self, ledger: LedgerClient, tools: InvoiceTools, worker_id: str, **options: Any) -> None:
        self.stop_event = threading.Event()
        self.events: List[Dict[str, Any]] = []
        self.report: Any = None
        self.worker = LedgerWorker(
            ledger,
            tools={"create_invoice": Tool(call=tools.create_invoice, lookup=tools.lookup)},
            stop_event=self.stop_event,
            worker_id=worker_id,
            on_event=self.events.append,
            **{"wait_ms": 1000, "lease_ms": 3000, **options},
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.report = self.worker.run()

    def stop(self, within: float = 15.0) -> None:
        self.stop_event.set()
        self.thread.join(within)

    def of(self, kind: str, ref: str) -> List[Dict[str, Any]]:
        return [event for event in list(self.events) if event["type"] == kind and event.get("operation_ref") == ref]


class WorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        running = services()
        cls.ledger = LedgerClient(running.ledger_url, api_key=running.keys["worker"])
        cls.provider = running.provider
        cls.tools = InvoiceTools(running.provider.url, timeout=0.5)
        cls.run_id = f"run_pywk_{uuid.uuid4().hex[:8]}"
        cls.count = 0

    def start(self, **policy: Any) -> str:
        type(self).count += 1
        ref = f"{self.run_id}/invoice_{self.count}"
        self.ledger.start_step(
            ref,
            run_id=self.run_id,
            tool="create_invoice",
            input={"customer_id": f"cus_{self.count}", "amount_cents": 1000 + self.count, "currency": "EUR"},
            policy={**POLICY, **policy},
        )
        return ref

    def wait_for(self, ref: str, statuses=("succeeded",), within: float = 30.0) -> Dict[str, Any]:
        deadline = time.time() + within
        while True:
            state = self.ledger.get_operation(ref)
            if state["status"] in statuses or time.time() > deadline:
                return state
            time.sleep(0.1)

    def evidence_of(self, ref: str) -> Dict[str, Any]:
        position = self.ledger.get_events(ref)["events"][-1]["position"]
        return self.ledger.get_evidence(ref, wait_for_position=position)

    def test_a_planned_step_is_driven_to_succeeded_with_one_create(self) -> None:
        worker = Running(self.ledger, self.tools, "py-w-plain")
        try:
            ref = self.start()
            state = self.wait_for(ref)
        finally:
            worker.stop()
        self.assertEqual(state["status"], "succeeded")
        self.assertEqual(self.provider.create_requests(ref), 1)
        invoices = self.provider.invoices(ref)
        self.assertEqual(len(invoices), 1)
        self.assertEqual(state["success"].get("evidence_ref"), invoices[0]["id"])
        recorded = worker.of("recorded", ref)
        self.assertEqual([(e["attempt"], e["status"], e["tool_called"]) for e in recorded], [(1, "succeeded", True)])
        # The facts carry the lease: the evidence names the worker that held the item.
        dispatched = [e for e in self.evidence_of(ref)["entries"] if e["type"] == "AttemptDispatched"]
        self.assertEqual(len(dispatched), 1)
        self.assertEqual((dispatched[0]["worker"]["holder"], dispatched[0]["worker"]["current"]), ("py-w-plain", True))

    def test_a_timeout_after_commit_is_verified_as_success_by_the_lookup(self) -> None:
        ref = f"{self.run_id}/timeout_{uuid.uuid4().hex[:6]}"
        self.provider.inject(ref, {"kind": "accept-then-timeout"})
        worker = Running(self.ledger, self.tools, "py-w-timeout")
        try:
            self.ledger.start_step(ref, run_id=self.run_id, tool="create_invoice",
                                   input={"customer_id": "cus_t", "amount_cents": 4200, "currency": "EUR"}, policy=POLICY)
            state = self.wait_for(ref)
        finally:
            worker.stop()
        self.assertEqual(state["status"], "succeeded")
        self.assertEqual(self.provider.create_requests(ref), 1)
        self.assertEqual(len(self.provider.invoices(ref)), 1)
        self.assertEqual([(e["next_action"], e["code"]) for e in worker.of("recorded", ref)], [("verify_operation", "OUTCOME_UNKNOWN")])
        self.assertEqual([(e["outcome"], e["status"]) for e in worker.of("verified", ref)], [("found_committed", "succeeded")])
        # Verified at once, under the dispatch's own lease: the feed never had to hand the step out again.
        self.assertEqual([e["kind"] for e in worker.of("item", ref)], ["dispatch"])
        evidence = self.evidence_of(ref)
        self.assertEqual(evidence["verdict"]["proven_by"], "verification")
        verification = [e for e in evidence["entries"] if e["type"] == "VerificationRecorded"]
        self.assertEqual(verification[0]["worker"]["holder"], "py-w-timeout")

    def test_two_workers_on_one_feed_never_run_one_attempt_twice(self) -> None:
        # A lease of 4 s (within the dispatch timeout of 8 s, which caps it) and slow creates of 2.5 s:
        # a call may stay open only as long as the lease it was dispatched under has left
        # (docs/reliability.md "When an attempt may still reach the provider"), so each slow create
        # ends inside its window, while the renewals keep the item from the other worker.
        refs = [self.start(dispatch_timeout_ms=8000) for _ in range(24)]
        for ref in refs[::4]:
            self.provider.inject(ref, {"kind": "slow", "delay_ms": 2500})
        tools = InvoiceTools(self.provider.url, timeout=10)
        first = Running(self.ledger, tools, "py-w-a", concurrency=4, lease_ms=4000)
        second = Running(self.ledger, tools, "py-w-b", concurrency=4, lease_ms=4000)
        try:
            states = {ref: self.wait_for(ref, within=60) for ref in refs}
        finally:
            first.stop()
            second.stop()
        self.assertEqual({ref: s["status"] for ref, s in states.items()}, {ref: "succeeded" for ref in refs})
        self.assertEqual({ref: self.provider.create_requests(ref) for ref in refs}, {ref: 1 for ref in refs})
        self.assertEqual({ref: len(self.provider.invoices(ref)) for ref in refs}, {ref: 1 for ref in refs})
        handled = {ref: len(first.of("item", ref)) + len(second.of("item", ref)) for ref in refs}
        self.assertEqual(handled, {ref: 1 for ref in refs})
        # Both took part (two workers on one feed, not one doing everything).
        self.assertGreater(first.report.items, 0)
        self.assertGreater(second.report.items, 0)
        self.assertEqual((first.report.leases_lost, second.report.leases_lost, first.report.errors, second.report.errors), (0, 0, 0, 0))

    def test_stop_takes_nothing_new_and_lets_the_item_in_hand_finish(self) -> None:
        ref = f"{self.run_id}/slow_{uuid.uuid4().hex[:6]}"
        self.provider.inject(ref, {"kind": "slow", "delay_ms": 2500})
        worker = Running(self.ledger, InvoiceTools(self.provider.url, timeout=5), "py-w-stop", wait_ms=500)
        self.ledger.start_step(ref, run_id=self.run_id, tool="create_invoice",
                               input={"customer_id": "cus_s", "amount_cents": 777, "currency": "EUR"}, policy=POLICY)
        deadline = time.time() + 15
        while not worker.of("item", ref) and time.time() < deadline:
            time.sleep(0.02)
        self.assertTrue(worker.of("item", ref), "the worker never took the step")
        worker.stop_event.set()
        later = self.start()  # started after the stop: not this worker's any more
        worker.thread.join(15)
        self.assertFalse(worker.thread.is_alive(), "run() did not return after the stop")
        # The item in hand finished: its envelope is recorded, nothing left in flight.
        self.assertEqual(self.ledger.get_operation(ref)["status"], "succeeded")
        self.assertEqual(self.provider.create_requests(ref), 1)
        self.assertEqual(worker.of("item", later), [])
        self.assertEqual(self.ledger.get_operation(later)["status"], "planned")
        self.assertEqual(worker.events[-1]["type"], "stopped")
        self.assertEqual((worker.report.items, worker.report.succeeded), (1, 1))
        # Its lease was released: another worker takes the step at once, not after a lease expiry.
        successor = Running(self.ledger, self.tools, "py-w-after")
        try:
            self.assertEqual(self.wait_for(later, within=10)["status"], "succeeded")
        finally:
            successor.stop()
        self.assertEqual(self.provider.create_requests(later), 1)
        self.assertFalse([e for e in successor.events if e["type"] == "item" and e.get("took_over_from")])

    def test_the_example_worker_process_drives_its_steps_and_stops_on_sigterm(self) -> None:
        run_id = f"run_pyfeed_{uuid.uuid4().hex[:8]}"
        running = services()
        env = {**os.environ, "LEDGER_API_KEY": running.keys["worker"], "PYTHONUNBUFFERED": "1"}
        args = [sys.executable, str(EXAMPLES / "feed_worker.py"), "--ledger", running.ledger_url, "--provider", self.provider.url,
                "--run", run_id, "--count", "2", "--worker-id", "py-feed-example"]
        process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            refs = [f"{run_id}/invoice_{n}" for n in (1, 2)]
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    if all(self.ledger.get_operation(ref)["status"] == "succeeded" for ref in refs):
                        break
                except Exception:  # noqa: BLE001 - not planned yet
                    pass
                time.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
        self.assertEqual(process.returncode, 0, err)
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(lines[-1]["type"], "stopped", out)
        self.assertEqual(lines[-1]["report"]["succeeded"], 2, out)
        self.assertEqual({ref: self.provider.create_requests(ref) for ref in refs}, {ref: 1 for ref in refs})


if __name__ == "__main__":
    unittest.main()
