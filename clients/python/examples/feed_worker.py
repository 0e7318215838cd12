"""A worker on the ledger's work feed: start steps with one call each, and let LedgerWorker drive them.

    python3 clients/python/examples/feed_worker.py --run run_feed --count 3 \\
        [--ledger http://127.0.0.1:3000] [--provider http://127.0.0.1:4010] [--concurrency 4]

With ``--count 0`` it starts nothing and only works the feed (start several of these for several
workers). It stops on Ctrl-C or SIGTERM (no new item taken, the items in hand finish), or with
``--until-done`` once the steps it started have all ended. Each line of output is one JSON object.
The API key, if the ledger needs one, comes from LEDGER_API_KEY.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.dirname(HERE))  # a clone without `pip install`: the package beside examples/

from invoice_tools import CREATE_INVOICE, InvoiceTools  # noqa: E402

from recovery_ledger import LedgerClient, LedgerWorker, Tool  # noqa: E402

ENDED = {"succeeded", "escalated", "needs_input", "awaiting_approval"}


_LOG_LOCK = threading.RLock()  # re-entrant: the SIGTERM handler may log while the main thread does


def log(event: Dict[str, Any]) -> None:
    fields = {key: asdict(value) if is_dataclass(value) and not isinstance(value, type) else value for key, value in event.items()}
    line = json.dumps({"at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **fields}) + "\n"
    # One write per line, under a lock: print() writes the text and its newline apart, so lines
    # from the worker's threads (and the signal handler) could run together.
    with _LOG_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ledger", default=os.environ.get("LEDGER_URL", "http://127.0.0.1:3000"))
    parser.add_argument("--provider", default=os.environ.get("PROVIDER_URL", "http://127.0.0.1:4010"))
    parser.add_argument("--run", default="run_feed")
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--worker-id")
    parser.add_argument("--tool-timeout", type=float, default=5.0, help="seconds a tool call may stay open: declared as its call window, and the timeout of each socket operation")
    parser.add_argument("--until-done", action="store_true", help="stop once the steps started here have ended")
    args = parser.parse_args()

    ledger = LedgerClient(args.ledger, api_key=os.environ.get("LEDGER_API_KEY"))
    tools = InvoiceTools(args.provider, timeout=args.tool_timeout)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    worker = LedgerWorker(
        ledger,
        # The tool's timeout declared as its call window: a killed worker's attempt can be verified
        # that soon after its grant, not only after the step's dispatch timeout.
        tools={CREATE_INVOICE: Tool(call=tools.create_invoice, lookup=tools.lookup, call_window_ms=max(1, round(args.tool_timeout * 1000)))},
        concurrency=args.concurrency,
        stop_event=stop,
        worker_id=args.worker_id,
        wait_ms=2000,
        on_event=log,
    )
    refs = []
    for n in range(args.first, args.first + args.count):
        ref = f"{args.run}/invoice_{n}"
        invoice = {"customer_id": f"cus_{n}", "amount_cents": 1000 * n, "currency": "EUR"}
        ledger.start_step(ref, run_id=args.run, tool=CREATE_INVOICE, input=invoice)
        refs.append(ref)
    if args.until_done:

        def watch() -> None:
            while not stop.is_set():
                if all(ledger.get_operation(ref)["status"] in ENDED for ref in refs):
                    stop.set()
                time.sleep(0.2)

        threading.Thread(target=watch, daemon=True).start()
    worker.run()


if __name__ == "__main__":
    main()
