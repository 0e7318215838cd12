"""A worker that creates invoices through the Python SDK, safe to kill at any point:

    python3 clients/python/examples/invoice_worker.py --run run_demo --count 3 \\
        [--ledger http://127.0.0.1:3000] [--provider http://127.0.0.1:4010] [--window-ms 2000]

It runs recover() first, then drives each step until it is succeeded, escalated, or parked for a
person (needs_input, awaiting_approval). The ledger decides; this loop is only the scheduler the SDK
hands its directives to: it waits for not_before, verifies when told, and never retries a write
whose outcome is unknown. Each line of output is one JSON object. The API key, if the ledger needs
one, comes from LEDGER_API_KEY.
"""

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.dirname(HERE))  # a clone without `pip install`: the package beside examples/

from invoice_tools import CREATE_INVOICE, VERIFICATION_TOOL, InvoiceTools  # noqa: E402

from recovery_ledger import (  # noqa: E402
    LedgerClient,
    LedgerError,
    LedgerNotFound,
    OutcomeNotRecordedError,
    WriteStep,
    execute_write,
    recover,
    verify,
)
from recovery_ledger.envelope import parse_iso_instant  # noqa: E402

PARKED = {"needs_input", "awaiting_approval"}
TERMINAL = {"succeeded", "escalated"}


@dataclass
class Job:
    step: WriteStep[Dict[str, Any]]
    due: float  # when the next move may happen (epoch seconds)
    next: str = "inspect"  # read where the step stands, ask for a dispatch, or verify what is in flight
    moves: int = 0  # moves made, to stop a step that never settles
    final: Optional[str] = None


_LOG_LOCK = threading.RLock()  # re-entrant: the SIGTERM handler may log while the main thread does


def log(**record: Any) -> None:
    fields = {key: value for key, value in record.items() if value is not None}
    line = json.dumps({"at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **fields}) + "\n"
    # One write per line, under a lock: print() writes the text and its newline apart, so lines
    # from the worker's threads (and the signal handler) could run together.
    with _LOG_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def due_at(not_before: Optional[str]) -> float:
    return parse_iso_instant(not_before).timestamp() if not_before else time.time()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", default=os.environ.get("LEDGER_URL", "http://127.0.0.1:3000"))
    parser.add_argument("--provider", default=os.environ.get("PROVIDER_URL", "http://127.0.0.1:4010"))
    parser.add_argument("--run", default="run_demo")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--max-moves", type=int, default=50)
    parser.add_argument("--tool-timeout", type=float, default=2.0, help="seconds a tool call may stay open (its call window)")
    args = parser.parse_args()

    ledger = LedgerClient(args.ledger, api_key=os.environ.get("LEDGER_API_KEY"), timeout=5.0)
    tools = InvoiceTools(args.provider, timeout=args.tool_timeout)
    call_window_ms = max(1, round(args.tool_timeout * 1000))

    # A restarted worker first settles what a previous life left in flight, by the same operation_refs.
    report = recover(ledger, {CREATE_INVOICE: tools.lookup})
    log(event="recovered", entries=[asdict(entry) for entry in report.entries], missing_lookups=report.missing_lookups)

    jobs: List[Job] = []
    for n in range(args.first, args.first + args.count):
        step = WriteStep(
            # Durable and derived from the job, never from the attempt: the same on every restart.
            operation_ref=f"{args.run}/invoice_{n}",
            run_id=args.run,
            tool=CREATE_INVOICE,
            input={"customer_id": f"cus_{n}", "amount_cents": 1000 + n, "currency": "EUR"},
            policy={"max_attempts": args.max_attempts, "consistency_window_ms": args.window_ms, "verification_tool": VERIFICATION_TOOL},
        )
        jobs.append(Job(step=step, due=time.time()))

    def schedule(job: Job, status: str, not_before: Optional[str]) -> None:
        """The worker's scheduling, by the state the ledger reports (not by guessing from the tool's result)."""
        job.due = due_at(not_before)
        if status in TERMINAL or status in PARKED:
            job.final = status
        elif status in ("dispatched", "verifying"):
            job.next = "verify"  # in flight without an outcome, or unknown: verify, never resend
        else:
            job.next = "execute"

    while any(job.final is None for job in jobs):
        open_jobs = [job for job in jobs if job.final is None]
        ready = [job for job in open_jobs if job.due <= time.time()]
        if not ready:
            time.sleep(max(0.01, min(job.due for job in open_jobs) - time.time()))
            continue
        for job in ready:
            job.moves += 1
            if job.moves > args.max_moves:
                job.final = "unsettled"
                continue
            step = job.step
            ref = step.operation_ref
            try:
                if job.next == "inspect":
                    try:
                        status = ledger.get_operation(ref)["status"]
                        log(event="inspected", operation_ref=ref, status=status)
                    except LedgerNotFound:
                        status = "planned"
                    schedule(job, status, None)
                elif job.next == "verify":
                    checked = verify(ledger, ref, tools.lookup)
                    log(event="verified", operation_ref=ref, kind=checked.kind, outcome=checked.outcome, status=checked.status, not_before=checked.not_before)
                    schedule(job, checked.status, checked.not_before)
                else:
                    # The tool's timeout is the longest its call stays open: declared as the call
                    # window, a killed life's attempt can be verified that soon after its grant.
                    outcome = execute_write(ledger, step, tools.create_invoice, call_window_ms=call_window_ms)
                    envelope: Dict[str, Any] = dict(outcome.envelope or {})
                    log(
                        event="executed",
                        operation_ref=ref,
                        kind=outcome.kind,
                        status=outcome.status,
                        attempt=outcome.attempt,
                        tool_called=outcome.tool_called,
                        code=envelope.get("code") if envelope.get("ok") is False else (outcome.refusal.code if outcome.refusal else None),
                        next_action=outcome.directive["next_action"],
                        not_before=outcome.not_before,
                    )
                    schedule(job, outcome.status, outcome.not_before)
            except OutcomeNotRecordedError as error:
                # The tool ran; the ledger still has the attempt in flight: verify it once it answers.
                log(event="outcome_not_recorded", operation_ref=ref, attempt=error.attempt)
                job.next, job.due = "verify", time.time() + 1
            except LedgerError as error:
                log(event="ledger_error", operation_ref=ref, code=error.code, status=error.status)
                job.due = time.time() + (error.retry_after_seconds or 1)

    summary: Dict[str, List[str]] = {}
    for job in jobs:
        summary.setdefault(job.final or "unsettled", []).append(job.step.operation_ref)
    log(event="done", summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
