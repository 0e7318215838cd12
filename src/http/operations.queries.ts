import { Inject, Injectable } from '@nestjs/common';
import { LedgerService } from '../ledger/ledger.service';
import { eventView } from '../ledger/step-views';
import type { OperationEvents, SubmitContext } from '@recovery-ledger/core';
import type { Caller } from './caller';
import { decodeCursor, encodeCursor } from '@recovery-ledger/projections';
import { checkOperationRef, optionalInteger } from './operation-ref';
import { pageLimit, single, type QueryParams } from './read-queries';

/** Events per page of `GET /v1/operations/{ref}/events`: what one request may cost, bounded. */
export const EVENTS_PAGE_DEFAULT = 100;
export const EVENTS_PAGE_MAX = 500;

const TRACEPARENT_PATTERN = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * W3C Trace Context §3.3.1: `key=value` members, comma-separated (optional spaces around), at most
 * 32; a key is `[a-z0-9][a-z0-9_*\/-]{0,255}` or `tenant@system`; a value is up to 256 printable
 * ASCII characters but `,` and `=`, not ending in a space; the whole header at most 512 here.
 */
const TRACESTATE_MEMBER =
  /^(?:[a-z0-9][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

export function isTracestate(value: string): boolean {
  if (value.length > 512) return false;
  const members = value.split(',').map((member) => member.trim());
  return members.length <= 32 && members.every((member) => TRACESTATE_MEMBER.test(member));
}

/** W3C trace context is kept only when well-formed; a malformed header is ignored, as the spec asks. */
export function submitContext(caller: Caller, ref: string, headers: Record<string, string | undefined>): SubmitContext {
  const traceparent = headers.traceparent?.trim().toLowerCase();
  const tracestate = headers.tracestate?.trim();
  const validTrace = traceparent !== undefined && TRACEPARENT_PATTERN.test(traceparent);
  return {
    tenant: caller.tenant,
    actor: caller.actor,
    operationRef: checkOperationRef(ref),
    ...(validTrace ? { traceparent } : {}),
    // A malformed tracestate is dropped, as the W3C asks; a well-formed one is an identifier and is
    // checked like the others before it is stored (src/ledger/identifiers.ts).
    ...(validTrace && tracestate && isTracestate(tracestate) ? { tracestate } : {}),
  };
}

/** Reads of one operation: the fold of its own stream, never a projection. */
@Injectable()
export class OperationsQueries {
  constructor(@Inject(LedgerService) private readonly ledger: LedgerService) {}

  async state(caller: Caller, ref: string) {
    const { view } = await this.ledger.getState(caller.tenant, checkOperationRef(ref));
    return view;
  }

  /**
   * One page of the stream's events (docs/contract.md §9): `limit` (1–500, default 100) events
   * after the cursor's revision, and `next_cursor` while more follow.
   */
  async events(caller: Caller, ref: string, params: QueryParams): Promise<OperationEvents> {
    const operationRef = checkOperationRef(ref);
    const asOfRevision = optionalInteger(
      single(params, 'as_of_revision'),
      'as_of_revision',
      0,
      Number.MAX_SAFE_INTEGER,
    );
    const limit = pageLimit(params, EVENTS_PAGE_DEFAULT, EVENTS_PAGE_MAX);
    const [afterRevision] = (decodeCursor(single(params, 'cursor'), ['number']) ?? [-1]) as number[];
    const { revision, events } = await this.ledger.events(caller.tenant, operationRef, { afterRevision, limit });
    const state =
      asOfRevision === undefined
        ? undefined
        : (await this.ledger.getState(caller.tenant, operationRef, asOfRevision)).view;
    const last = events[events.length - 1];
    return {
      operation_ref: operationRef,
      revision,
      events: events.map(eventView),
      ...(last !== undefined && last.revision < revision ? { next_cursor: encodeCursor([last.revision]) } : {}),
      ...(state === undefined ? {} : { as_of_revision: asOfRevision, state }),
    };
  }
}
