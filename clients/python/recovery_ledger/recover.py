"""What a restarted worker runs first (docs/contract.md §4, crash recovery)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, List, Literal, Mapping, Optional

from .api_types import Directive
from .errors import LedgerError
from .execute_write import LedgerApi, Lookup, _utc_now, verify
from .envelope import parse_iso_instant

__all__ = ["RecoveryEntry", "RecoveryReport", "recover"]

# verified: the lookup ran and its outcome is recorded; refused: the ledger refused the outcome (a
# not_found inside the consistency window: see not_before); no_lookup: no lookup is registered for
# the tool (reported, never guessed); failed: recording failed, the operation stays in the list.
RecoveryEntryResult = Literal["verified", "refused", "no_lookup", "failed"]


@dataclass(frozen=True)
class RecoveryEntry:
    operation_ref: str
    tool: str
    run_id: str
    listed_status: str  # where the operation stood when it was listed
    attempt: int
    result: RecoveryEntryResult
    outcome: Optional[str] = None
    status: Optional[str] = None
    directive: Optional[Directive] = None
    not_before: Optional[str] = None
    code: Optional[str] = None


@dataclass(frozen=True)
class RecoveryReport:
    entries: List[RecoveryEntry] = field(default_factory=list)
    # The earliest instant a refused check may run again, for the caller's scheduler.
    next_check_at: Optional[str] = None
    # Tools that had operations to recover and no registered lookup.
    missing_lookups: List[str] = field(default_factory=list)


def recover(
    ledger: LedgerApi,
    lookups: Mapping[str, Lookup],
    *,
    older_than_ms: Optional[int] = None,
    now: Callable[[], datetime] = _utc_now,
    traceparent: Optional[str] = None,
    tracestate: Optional[str] = None,
) -> RecoveryReport:
    """Every operation the ledger has in flight or verifying is verified through the lookup
    registered for its tool, by its OWN operation_ref, and the outcome recorded. No new key is ever
    made here, and nothing is dispatched: what the ledger decides next (retry_ready, succeeded,
    escalated) comes back in the report for the worker's normal path. The list is read in full
    before anything is recorded, so entries leaving it while it is paged cannot make a page skip any.

    ``older_than_ms`` leaves alone operations younger than this, which a live worker may still be
    finishing."""
    trace = {"traceparent": traceparent, "tracestate": tracestate}
    items = list(ledger.recovery_items(older_than_ms=older_than_ms, **trace))
    entries: List[RecoveryEntry] = []
    missing = set()
    for item in items:
        base = {
            "operation_ref": item["operation_ref"],
            "tool": item["tool"],
            "run_id": item["run_id"],
            "listed_status": item["status"],
            "attempt": item["attempt"],
        }
        lookup = lookups.get(item["tool"])
        if lookup is None:
            missing.add(item["tool"])
            entries.append(RecoveryEntry(**base, result="no_lookup"))
            continue
        try:
            verified = verify(ledger, item["operation_ref"], lookup, now=now, **trace)
        except LedgerError as error:
            # One operation the ledger could not take now does not stop the others; a bug still raises.
            entries.append(RecoveryEntry(**base, result="failed", code=error.code))
            continue
        entries.append(
            RecoveryEntry(
                **base,
                result="verified" if verified.kind == "recorded" else "refused",
                outcome=verified.outcome,
                status=verified.status,
                directive=verified.directive,
                not_before=verified.not_before,
                code=verified.refusal.code if verified.refusal else None,
            )
        )
    pending = sorted(
        (entry.not_before for entry in entries if entry.result == "refused" and entry.not_before),
        key=parse_iso_instant,
    )
    return RecoveryReport(entries=entries, next_check_at=pending[0] if pending else None, missing_lookups=sorted(missing))
