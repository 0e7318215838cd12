"""The adapter a Python runtime writes once per provider: the write tool, answering envelopes, and
the lookup by operation_ref that verification and recovery use. Everything else is the SDK's."""

import json
import urllib.parse
import urllib.request
from typing import Any, Dict

from recovery_ledger import LookupResult, ToolCallContext, ToolEnvelope, call_http_tool

CREATE_INVOICE = "create_invoice"
VERIFICATION_TOOL = "get_invoice_by_operation_ref"


class InvoiceTools:
    def __init__(self, provider_url: str, timeout: float = 5.0) -> None:
        self.base = provider_url.rstrip("/")
        self.timeout = timeout

    def create_invoice(self, invoice: Dict[str, Any], context: ToolCallContext) -> ToolEnvelope:
        """POST /invoices with the operation_ref as Idempotency-Key: one invoice per step."""
        return call_http_tool(
            f"{self.base}/invoices",
            body=invoice,
            operation_ref=context.idempotency_key,
            side_effect=context.side_effect,
            timeout=self.timeout,
            # The end of the call window the ledger granted: the request is cut off there.
            deadline=context.deadline,
            # The ledger's call deadline, as Ledger-Call-Deadline: a provider that can enforce it refuses a late call.
            call_deadline=context.call_deadline,
            verification_tool=VERIFICATION_TOOL,
        )

    def lookup(self, operation_ref: str) -> LookupResult:
        """GET /invoices?operation_ref=: found (the invoice id is the evidence) or not; raising is "cannot tell"."""
        url = f"{self.base}/invoices?operation_ref={urllib.parse.quote(operation_ref, safe='')}"
        with urllib.request.urlopen(url, timeout=self.timeout) as response:
            items = json.load(response)["items"]
        found = [item for item in items if item["operation_ref"] == operation_ref]
        return LookupResult.committed(found[0]["id"], found[0]) if found else LookupResult.not_found()
