"""A step planned from TypeScript and resumed from Python: the ledger sees the same input hash.

test/e2e/python-client.e2e.spec.ts runs the TypeScript SDK's executeWrite on a step the provider
refuses as invalid (needs_input) and names it in RL_TEST_TS_STEP; here the same step, input
unchanged, must be refused as an unchanged retry without calling the tool, and a corrected input
must run as attempt 2."""

import json
import os
import unittest
from dataclasses import replace

from tests.support import services

from invoice_tools import InvoiceTools
from recovery_ledger import LedgerClient, WriteStep, execute_write, input_hash


class CrossLanguageTest(unittest.TestCase):
    def test_a_step_planned_in_typescript_resumes_in_python(self) -> None:
        planned = os.environ.get("RL_TEST_TS_STEP")
        if not planned:
            self.skipTest("RL_TEST_TS_STEP is set only by test/e2e/python-client.e2e.spec.ts")
        running = services()
        ts = json.loads(planned)
        ledger = LedgerClient(running.ledger_url, api_key=running.keys["cross"])
        tools = InvoiceTools(running.provider.url, timeout=2)
        state = ledger.get_operation(ts["operation_ref"])
        self.assertEqual(state["status"], "needs_input")
        planned_hash = next(event["data"]["input_hash"] for event in ledger.get_events(ts["operation_ref"])["events"] if event["type"] == "StepPlanned")
        self.assertEqual(planned_hash, input_hash(ts["input"]))

        step = WriteStep(operation_ref=ts["operation_ref"], run_id=ts["run_id"], tool=ts["tool"], input=ts["input"], policy=ts["policy"])
        requests_before = running.provider.create_requests(step.operation_ref)
        unchanged = execute_write(ledger, step, tools.create_invoice)
        self.assertEqual((unchanged.kind, unchanged.tool_called, unchanged.refusal.code), ("refused", False, "UNCHANGED_RETRY"))
        self.assertEqual(running.provider.create_requests(step.operation_ref), requests_before)

        fixed = execute_write(ledger, replace(step, input={**step.input, "customer_id": "cus_fixed"}), tools.create_invoice)
        self.assertEqual((fixed.status, fixed.attempt), ("succeeded", 2))
        self.assertEqual(len(running.provider.invoices(step.operation_ref)), 1)
