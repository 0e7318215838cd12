import type { EventMetadata } from '../store/event-store.port';
import { CliError } from './cli-errors';

/**
 * The log as CloudEvents 1.0 (https://github.com/cloudevents/spec), one structured-mode JSON event
 * per line, for tools that consume CloudEvents. Each line carries every field its event's chain hash
 * covers (src/integrity/hash-chain.ts), so a third party can recompute the chain from the export alone
 * (docs/operations.md, "export, import, verify"): `id` the event id, `type` the event type under
 * `dev.recovery-ledger.`, `subject` the operation_ref, `time` when it was recorded (exactly as
 * stored), `data`, and the rest as extension attributes, named in lower-case letters and digits as
 * the spec asks: the chain (`chainhash`, `chainprevhash`, `ledgerstream`, `ledgerrevision`), who and
 * under what (`ledgeractor`, `ledgertenant`, `ledgerschemaversion`, `ledgersubmittedhash`,
 * `ledgercausation`, `ledgerlease` as JSON text), the W3C trace context under the names of the
 * CloudEvents distributed-tracing extension (`traceparent`, `tracestate`), and `ledgerposition`,
 * which the hash does not cover. It is an export only: `import` reads the NDJSON archive, which
 * also carries its footer.
 */
export interface ArchivedEvent {
  stream: string;
  revision: number;
  position: number;
  event_id: string;
  type: string;
  data: unknown;
  metadata: EventMetadata;
}

export const CLOUDEVENT_TYPE_PREFIX = 'dev.recovery-ledger.';

/** Each metadata field the chain hash covers, and the attribute that carries it. */
const METADATA_ATTRIBUTES: Record<string, (value: unknown) => [string, unknown]> = {
  schema_version: (value) => ['ledgerschemaversion', value],
  recorded_at: (value) => ['time', value],
  actor: (value) => ['ledgeractor', value],
  tenant: (value) => ['ledgertenant', value],
  operation_ref: (value) => ['subject', value],
  causation_event_id: (value) => ['ledgercausation', value],
  traceparent: (value) => ['traceparent', value],
  tracestate: (value) => ['tracestate', value],
  // The spec's type system has no object: the lease travels as its JSON text.
  lease: (value) => ['ledgerlease', JSON.stringify(value)],
  submitted_hash: (value) => ['ledgersubmittedhash', value],
  prev_hash: (value) => ['chainprevhash', value],
  hash: (value) => ['chainhash', value],
};

export function cloudEventOf(event: ArchivedEvent): Record<string, unknown> {
  const { metadata } = event;
  const attributes: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(metadata)) {
    if (value === undefined) continue;
    const attribute = METADATA_ATTRIBUTES[field];
    // An export that dropped a covered field could not be checked: refuse it rather than write it.
    if (!attribute) {
      throw new CliError(`the event ${event.event_id} has metadata ${field}, which no CloudEvents attribute carries`);
    }
    const [name, carried] = attribute(value);
    attributes[name] = carried;
  }
  return {
    specversion: '1.0',
    id: event.event_id,
    source: `/recovery-ledger/tenants/${encodeURIComponent(metadata.tenant)}`,
    type: `${CLOUDEVENT_TYPE_PREFIX}${event.type}`,
    subject: metadata.operation_ref,
    time: metadata.recorded_at,
    datacontenttype: 'application/json',
    data: event.data,
    ...attributes,
    ledgerstream: event.stream,
    ledgerrevision: event.revision,
    ledgerposition: event.position,
  };
}

/** One line of the NDJSON archive as a CloudEvents line; its header and footer have none. */
export function cloudEventLine(archiveLine: string): string {
  const parsed = JSON.parse(archiveLine) as { kind?: string } & ArchivedEvent;
  return parsed.kind === 'event' ? `${JSON.stringify(cloudEventOf(parsed))}\n` : '';
}
