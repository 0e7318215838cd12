"""LedgerClient against the real built ledger over HTTP: the contract's answers and its typed
errors with their stable codes, and every envelope the Python normalizers build is one the ledger
itself accepts."""

import json
import unittest
import uuid

from tests.support import NOW, load_vectors, services
from tests.test_injection import channels

from recovery_ledger import (
    LedgerAuthError,
    LedgerClient,
    LedgerInvalidRequest,
    LedgerNotFound,
    LedgerRefusal,
    canonical_json,
    input_hash,
    is_ledger_refusal,
)
from recovery_ledger.normalizers.builders import iso_instant

UNKNOWN = {
    "ok": False,
    "code": "OUTCOME_UNKNOWN",
    "category": "dependency",
    "commit_state": "unknown",
    "retry": {"directive": "never", "max_attempts_remaining": 0},
    "next_action": "verify_operation",
    "operation_ref": "",
    "safe_details": {"verification_tool": "get_invoice_by_operation_ref"},
    "agent_message": "The write may have completed. Verify operation_ref before any new write.",
    "user_message": "The request is being checked before anything is sent again.",
}


class LedgerClientIntegrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        running = services()
        cls.url = running.ledger_url
        cls.ledger = LedgerClient(running.ledger_url, api_key=running.keys["client"])
        cls.auditor = LedgerClient(running.ledger_url, api_key=running.keys["auditor"])
        cls.count = 0

    def new_ref(self) -> str:
        type(self).count += 1
        return f"run_pyclient/step_{self.count}_{uuid.uuid4().hex[:6]}"

    def plan(self, ref: str, side_effect: str = "write", **extra):
        data = {"run_id": "run_pyclient", "tool": "create_invoice", "side_effect": side_effect, "input_hash": input_hash({"ref": ref}), **extra}
        return self.ledger.plan_step(ref, data)

    def test_submits_are_idempotent_by_event_id(self) -> None:
        ref = self.new_ref()
        event_id = str(uuid.uuid4())
        data = {"run_id": "run_pyclient", "tool": "create_invoice", "side_effect": "write", "input_hash": "h1"}
        first = self.ledger.plan_step(ref, data, event_id=event_id)
        again = self.ledger.plan_step(ref, data, event_id=event_id)
        self.assertEqual(first["results"], [{"event_id": event_id, "status": "appended"}])
        self.assertEqual(again["results"], [{"event_id": event_id, "status": "duplicate"}])
        self.assertEqual((again["revision"], again["state"]["status"]), (first["revision"], "planned"))
        # The ref is one path segment, slash and all.
        self.assertEqual(self.ledger.get_operation(ref)["operation_ref"], ref)
        with self.assertRaises(LedgerRefusal) as reused:
            self.ledger.plan_step(ref, {**data, "input_hash": "h2"}, event_id=event_id)
        self.assertEqual(reused.exception.code, "EVENT_ID_REUSED")

    def test_a_submit_sends_an_idempotency_key_the_ledger_honours(self) -> None:
        ref = self.new_ref()
        event_id = str(uuid.uuid4())
        data = {"run_id": "run_pyclient", "tool": "create_invoice", "side_effect": "write", "input_hash": "h1"}
        key = f"pyclient-{uuid.uuid4()}"
        first = self.ledger.plan_step(ref, data, event_id=event_id, idempotency_key=key)
        # The same key and body: the first answer itself, not a new decision (which would say duplicate).
        again = self.ledger.plan_step(ref, data, event_id=event_id, idempotency_key=key)
        self.assertEqual(again, first)
        self.assertEqual(again["results"], [{"event_id": event_id, "status": "appended"}])
        with self.assertRaises(LedgerInvalidRequest) as reused:
            self.ledger.plan_step(ref, {**data, "input_hash": "h2"}, idempotency_key=key)
        self.assertEqual((reused.exception.code, reused.exception.status), ("IDEMPOTENCY_KEY_REUSED", 422))

    def test_refusals_carry_the_code_the_directive_and_the_state(self) -> None:
        ref = self.new_ref()
        with self.assertRaises(LedgerRefusal) as unplanned:
            self.ledger.dispatch_attempt(ref, {"attempt": 1, "input_hash": "h"})
        self.assertEqual((unplanned.exception.code, unplanned.exception.status), ("STEP_NOT_PLANNED", 409))
        self.plan(ref)
        hash_ = input_hash({"ref": ref})
        granted = self.ledger.dispatch_attempt(ref, {"attempt": 1, "input_hash": hash_})
        self.assertEqual(granted["state"]["status"], "dispatched")
        with self.assertRaises(LedgerRefusal) as in_flight:
            self.ledger.dispatch_attempt(ref, {"attempt": 2, "input_hash": hash_})
        self.assertTrue(is_ledger_refusal(in_flight.exception, "ATTEMPT_IN_FLIGHT"))
        self.assertEqual(in_flight.exception.state["status"], "dispatched")
        self.assertIn("next_action", in_flight.exception.directive)
        answer = self.ledger.record_envelope(ref, {"attempt": 1, "envelope": {**UNKNOWN, "operation_ref": ref}})
        self.assertEqual((answer["state"]["status"], answer["directive"]["next_action"]), ("verifying", "verify_operation"))
        with self.assertRaises(LedgerRefusal) as verify_first:
            self.ledger.dispatch_attempt(ref, {"attempt": 2, "input_hash": hash_})
        self.assertEqual(verify_first.exception.code, "VERIFY_BEFORE_RETRY")
        with self.assertRaises(LedgerRefusal) as stale:
            self.ledger.record_verification(ref, {"outcome": "found_committed", "checked_at": iso_instant(NOW), "evidence_ref": "inv_1"}, expected_revision=0)
        self.assertEqual(stale.exception.code, "REVISION_CONFLICT")

    def test_invalid_requests_name_the_field(self) -> None:
        ref = self.new_ref()
        self.plan(ref)
        self.ledger.dispatch_attempt(ref, {"attempt": 1, "input_hash": input_hash({"ref": ref})})
        with self.assertRaises(LedgerInvalidRequest) as invalid:
            self.ledger.record_envelope(ref, {"attempt": 1, "envelope": {**UNKNOWN, "operation_ref": ref, "retry": {"directive": "after_delay", "max_attempts_remaining": 0}}})
        self.assertEqual((invalid.exception.code, invalid.exception.status), ("ENVELOPE_INVALID", 422))
        self.assertIn("retry", invalid.exception.field or "")
        with self.assertRaises(LedgerInvalidRequest) as bad:
            self.ledger.submit(ref, [{"type": "NoSuchFact", "data": {}}])
        self.assertEqual(bad.exception.code, "BAD_REQUEST")

    def test_reads_and_their_errors(self) -> None:
        with self.assertRaises(LedgerNotFound) as missing:
            self.ledger.get_operation(self.new_ref())
        self.assertEqual(missing.exception.code, "OPERATION_NOT_FOUND")
        ref = self.new_ref()
        planned = self.plan(ref)
        events = self.ledger.get_events(ref, as_of_revision=0)
        self.assertEqual([event["type"] for event in events["events"]][:1], ["StepPlanned"])
        self.assertEqual(events["state"]["status"], "planned")
        evidence = self.ledger.get_evidence(ref, wait_for_position=planned["position"])
        self.assertEqual(evidence["operation_ref"], ref)
        self.assertEqual(self.ledger.get_run("run_pyclient", wait_for_position=planned["position"])["run_id"], "run_pyclient")
        self.assertIsInstance(self.ledger.list_recovery()["items"], list)
        self.assertIsInstance(self.ledger.get_trust_metrics(), dict)
        self.assertIn("properties", json.dumps(self.ledger.get_envelope_schema()))

    def test_keys_roles_and_tenants(self) -> None:
        with self.assertRaises(LedgerAuthError) as unknown:
            LedgerClient(self.url, api_key="x" * 32, max_retries=0).get_operation("a/b")
        self.assertEqual((unknown.exception.code, unknown.exception.status), ("UNAUTHENTICATED", 401))
        with self.assertRaises(LedgerAuthError) as forbidden:
            self.auditor.plan_step(self.new_ref(), {"run_id": "r", "tool": "t", "side_effect": "write", "input_hash": "h"})
        self.assertEqual((forbidden.exception.code, forbidden.exception.status), ("FORBIDDEN", 403))
        ref = self.new_ref()
        self.plan(ref)
        self.assertEqual(self.auditor.get_operation(ref)["status"], "planned")
        other = LedgerClient(self.url, api_key=services().keys["contract"])
        with self.assertRaises(LedgerNotFound):
            other.get_operation(ref)  # another tenant's operation does not exist for this key

    def test_the_ledger_accepts_every_envelope_the_normalizers_build(self) -> None:
        # The Python validator's word is only as good as the ledger's: record one of each distinct
        # envelope the corpus produced, for a write and for a read, on the real service.
        distinct = {}
        for side_effect in ("write", "read"):
            for text in load_vectors("injection-corpus.json")["hostile_texts"][:3]:
                for _channel, envelope in channels(text, side_effect):
                    key = canonical_json({**envelope, "retry": {**envelope["retry"], "not_before": None}, "side_effect": side_effect})
                    distinct.setdefault(key, (side_effect, envelope))
        self.assertGreater(len(distinct), 10)
        for side_effect, envelope in distinct.values():
            ref = self.new_ref()
            self.plan(ref, side_effect)
            self.ledger.dispatch_attempt(ref, {"attempt": 1, "input_hash": input_hash({"ref": ref})})
            answer = self.ledger.record_envelope(ref, {"attempt": 1, "envelope": {**envelope, "operation_ref": ref}})
            with self.subTest(code=envelope["code"], side_effect=side_effect):
                self.assertNotEqual(answer["state"]["status"], "dispatched")
