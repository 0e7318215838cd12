"""The crash-recovery fault injection of docs/contract.md §4, in Python: a real worker process (examples/invoice_worker.py)
is killed with SIGKILL after the ledger granted its write, and the next life recovers the operation
by the same operation_ref, never a new key. Against the real built ledger and the example provider.

Three cases: killed while the provider works on the write (it commits; the lookup proves it), killed
with the request lost on the way (the lookup finds nothing, after the consistency window, and the
same key runs again), and a seeded random schedule of kills over several lives (RL_CRASH_SEED
replays one; the seed is in every failure message)."""

import json
import os
import random
import signal
import subprocess
import sys
import time
import unittest
import uuid
from typing import Any, Dict, List, Optional

from tests.loopback import RawServer, read_request
from tests.support import PYTHON_ROOT, WORKER, services

from recovery_ledger import LedgerClient


class Life:
    def __init__(self, code: Optional[int], killed: bool, lines: List[Dict[str, Any]], stderr: str) -> None:
        self.code, self.killed, self.lines, self.stderr = code, killed, lines, stderr

    def events(self, name: str) -> List[Dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == name]


class CrashRecoveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        running = services()
        cls.running = running
        cls.ledger = LedgerClient(running.ledger_url, api_key=running.keys["crash"])
        cls.provider = running.provider

    def life(self, run: str, count: int, *, provider_url: Optional[str] = None, window_ms: int = 400,
             kill_when=None, kill_after: Optional[float] = None, deadline: float = 60.0) -> Life:
        args = [sys.executable, str(WORKER), "--ledger", self.running.ledger_url, "--provider", provider_url or self.provider.url,
                "--run", run, "--count", str(count), "--window-ms", str(window_ms), "--max-attempts", "5", "--tool-timeout", "0.6"]
        env = {**os.environ, "LEDGER_API_KEY": self.running.keys["crash"], "PYTHONPATH": str(PYTHON_ROOT)}
        process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed = False
        started = time.time()
        while process.poll() is None and (kill_when is not None or kill_after is not None):
            if (kill_when is not None and kill_when()) or (kill_after is not None and time.time() - started > kill_after):
                process.send_signal(signal.SIGKILL)
                killed = True
                break
            if time.time() - started > deadline:
                break
            time.sleep(0.003)
        try:
            stdout, stderr = process.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        lines = []
        for line in stdout.splitlines():
            if line.startswith("{"):
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    lines.append({"unparsed": line})
        return Life(process.returncode, killed, lines, stderr)

    def events(self, ref: str) -> List[Dict[str, Any]]:
        return self.ledger.get_events(ref)["events"]

    def assert_settled_once(self, ref: str, where: str) -> Dict[str, Any]:
        state = self.ledger.get_operation(ref)
        invoices = self.provider.invoices(ref)
        self.assertEqual(state["status"], "succeeded", where)
        self.assertEqual(len(invoices), 1, where)
        # The ledger's proof names the provider's own invoice for this key.
        self.assertEqual(state["success"].get("evidence_ref"), invoices[0]["id"], where)
        return state

    def test_killed_while_the_provider_commits_the_next_life_proves_it_by_the_same_ref(self) -> None:
        run = f"run_pycrash_{uuid.uuid4().hex[:8]}"
        ref = f"{run}/invoice_1"
        self.provider.inject(ref, {"kind": "slow", "delay_ms": 1500})
        first = self.life(run, 1, kill_when=lambda: self.provider.create_requests(ref) >= 1)
        self.assertTrue(first.killed, first.stderr)
        state = self.ledger.get_operation(ref)
        self.assertEqual((state["status"], state["current_attempt"]), ("dispatched", 1))
        self.assertNotIn("EnvelopeRecorded", [event["type"] for event in self.events(ref)])

        # The provider finishes the write the dead worker started.
        deadline = time.time() + 5
        while not self.provider.invoices(ref) and time.time() < deadline:
            time.sleep(0.05)
        second = self.life(run, 1)
        where = f"second life: {second.stderr}\n{second.lines}"
        self.assertEqual(second.code, 0, where)
        recovered = [entry for line in second.events("recovered") for entry in line["entries"]]
        self.assertIn(
            {"operation_ref": ref, "result": "verified", "outcome": "found_committed", "status": "succeeded"},
            [{key: entry[key] for key in ("operation_ref", "result", "outcome", "status")} for entry in recovered],
            where,
        )
        self.assertEqual(second.events("done")[0]["summary"], {"succeeded": [ref]}, where)
        self.assert_settled_once(ref, where)
        self.assertEqual(self.provider.create_requests(ref), 1, where)
        types = [event["type"] for event in self.events(ref)]
        self.assertEqual((types.count("AttemptDispatched"), types.count("VerificationRecorded")), (1, 1), where)

    def test_killed_with_the_request_lost_the_same_key_runs_again_after_the_window(self) -> None:
        run = f"run_pycrash_{uuid.uuid4().hex[:8]}"
        ref = f"{run}/invoice_1"
        # A black hole stands where the provider should be: it takes the request and never answers.
        swallowed: List[bytes] = []
        black_hole = RawServer(lambda connection: (swallowed.append(read_request(connection)), time.sleep(3)))
        self.addCleanup(black_hole.close)
        first = self.life(run, 1, provider_url=black_hole.url, window_ms=3000, kill_when=lambda: bool(swallowed))
        self.assertTrue(first.killed, first.stderr)
        self.assertIn(f"Idempotency-Key: {ref}".encode(), swallowed[0])
        self.assertEqual(self.ledger.get_operation(ref)["status"], "dispatched")

        second = self.life(run, 1, window_ms=3000)
        where = f"second life: {second.stderr}\n{second.lines}"
        self.assertEqual(second.code, 0, where)
        recovered = [entry for line in second.events("recovered") for entry in line["entries"] if entry["operation_ref"] == ref]
        self.assertEqual((len(recovered), recovered[0]["outcome"]), (1, "not_found"), where)
        if recovered[0]["result"] == "refused":
            # Inside the consistency window "not found" proves nothing yet: refused, with when to look again.
            self.assertEqual(recovered[0]["code"], "VERIFICATION_PREMATURE", where)
            self.assertIsNotNone(recovered[0]["not_before"], where)
        else:
            # A machine slow enough to start the second life after the window: accepted at once.
            self.assertEqual((recovered[0]["result"], recovered[0]["status"]), ("verified", "retry_ready"), where)
        state = self.assert_settled_once(ref, where)
        self.assertEqual(state["attempts_used"], 2, where)
        self.assertEqual(self.provider.create_requests(ref), 1, where)
        # The second write ran only after the ledger accepted proof that the first did not commit.
        sequence = [(event["type"], event["data"].get("outcome")) for event in self.events(ref)
                    if event["type"] in ("AttemptDispatched", "VerificationRecorded")]
        self.assertEqual(sequence, [("AttemptDispatched", None), ("VerificationRecorded", "not_found"), ("AttemptDispatched", None)], where)

    def test_random_kills_over_many_lives_leave_one_invoice_per_operation(self) -> None:
        seed = int(os.environ.get("RL_CRASH_SEED", str(int(time.time() * 1000) % 2**31)))
        draw = random.Random(seed)
        run = f"run_pycrash_{uuid.uuid4().hex[:8]}"
        count = 18
        refs = [f"{run}/invoice_{n}" for n in range(1, count + 1)]
        faults = [{"kind": "slow", "delay_ms": 300}, {"kind": "slow", "delay_ms": 900}, {"kind": "accept-then-destroy"},
                  {"kind": "accept-then-timeout"}, {"kind": "bad-gateway", "commit": True}, {"kind": "bad-gateway"},
                  {"kind": "rate-limit", "retry_after_s": 1}]
        lives = []
        for round_ in range(6):
            # The queue grows by three and a life is killed by its second new write at the latest, so
            # every life still has work when it dies.
            queued = min(count, 3 + 3 * round_)
            for _ in range(2):
                self.provider.inject(draw.choice(refs[:queued]), draw.choice(faults))
            sent = self.provider.create_requests()
            kill_at = sent + 1 + draw.randrange(2)
            slack = draw.randrange(15) / 1000
            fire = {"at": None}

            def kill_when(kill_at=kill_at, slack=slack, fire=fire):
                if fire["at"] is None and self.provider.create_requests() >= kill_at:
                    fire["at"] = time.time() + slack
                return fire["at"] is not None and time.time() >= fire["at"]

            lives.append(self.life(run, queued, kill_when=kill_when, kill_after=5.0))
        last = self.life(run, count)
        lives.append(last)
        where = f"seed {seed}; last life: {last.stderr}\n{last.lines}"
        self.assertEqual(last.code, 0, where)
        time.sleep(1.0)  # a killed life's slow request finishes before the provider is read
        self.assertGreaterEqual(sum(1 for life in lives if life.killed), 3, where)
        recovered = [entry["operation_ref"] for life in lives for line in life.events("recovered") for entry in line["entries"]]
        self.assertTrue(set(recovered) <= set(refs), where)  # recover() never invents a key
        invoices = [invoice for invoice in self.provider.all_invoices() if invoice["operation_ref"].startswith(f"{run}/")]
        self.assertTrue({invoice["operation_ref"] for invoice in invoices} <= set(refs), where)
        for ref in refs:
            state = self.ledger.get_operation(ref)
            mine = [invoice for invoice in invoices if invoice["operation_ref"] == ref]
            self.assertIn(state["status"], ("succeeded", "escalated"), f"{ref} {where}")
            self.assertLessEqual(len(mine), 1, f"{ref} {where}")
            if state["status"] == "succeeded":
                self.assertEqual(len(mine), 1, f"{ref} {where}")
                self.assertEqual(state["success"].get("evidence_ref"), mine[0]["id"], f"{ref} {where}")
            # Two writes granted for one key need proof in between that the first did not commit.
            proven = True
            for event in self.events(ref):
                if event["type"] == "AttemptDispatched":
                    self.assertTrue(proven, f"{ref} attempt {event['data']['attempt']} unproven; {where}")
                    proven = False
                elif event["type"] == "EnvelopeRecorded" and not event["data"]["envelope"]["ok"] and event["data"]["envelope"]["commit_state"] == "not_committed":
                    proven = True
                elif event["type"] == "VerificationRecorded" and event["data"]["outcome"] == "not_found":
                    proven = True
