import { Inject, Injectable } from '@nestjs/common';
import { LedgerService } from '../ledger/ledger.service';
import type { SubmitContext } from '../contract/ledger-api.types';
import type { Caller } from './caller';
import { checkOperationRef, optionalInteger } from './operation-ref';

const TRACEPARENT_PATTERN = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

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
    ...(validTrace && tracestate && tracestate.length <= 512 ? { tracestate } : {}),
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

  async events(caller: Caller, ref: string, asOfRevisionRaw?: string) {
    const operationRef = checkOperationRef(ref);
    const asOfRevision = optionalInteger(asOfRevisionRaw, 'as_of_revision', 0, Number.MAX_SAFE_INTEGER);
    const { view, events } = await this.ledger.getState(caller.tenant, operationRef, asOfRevision);
    return {
      operation_ref: operationRef,
      revision: events[events.length - 1].revision,
      events: events.map((event) => ({
        revision: event.revision,
        position: event.position,
        event_id: event.event_id,
        type: event.type,
        recorded_at: event.metadata.recorded_at,
        actor: event.metadata.actor,
        ...(event.metadata.causation_event_id ? { causation_event_id: event.metadata.causation_event_id } : {}),
        ...(event.metadata.traceparent ? { traceparent: event.metadata.traceparent } : {}),
        schema_version: event.metadata.schema_version,
        data: event.data,
        prev_hash: event.metadata.prev_hash,
        hash: event.metadata.hash,
      })),
      ...(asOfRevision === undefined ? {} : { as_of_revision: asOfRevision, state: view }),
    };
  }
}
