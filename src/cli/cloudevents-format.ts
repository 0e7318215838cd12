/**
 * The log as CloudEvents 1.0 (https://github.com/cloudevents/spec), one structured-mode JSON event
 * per line, for tools that consume CloudEvents. Each ledger event keeps its id (`id`), its type
 * (`type`, under `dev.recovery-ledger.`), the operation it belongs to (`subject` = operation_ref),
 * when it was recorded (`time`) and its data; its place in the hash chain travels as extension
 * attributes (`chainhash`, `chainprevhash`, `ledgerstream`, `ledgerrevision`, `ledgerposition`:
 * lower-case letters and digits, as the spec names extensions), so a consumer can check the chain.
 * It is an export only: `import` reads the NDJSON archive, which also carries its footer.
 */
export interface ArchivedEvent {
  stream: string;
  revision: number;
  position: number;
  event_id: string;
  type: string;
  data: unknown;
  metadata: { tenant: string; operation_ref: string; recorded_at: string; hash: string; prev_hash: string };
}

export const CLOUDEVENT_TYPE_PREFIX = 'dev.recovery-ledger.';

export function cloudEventOf(event: ArchivedEvent): Record<string, unknown> {
  const { metadata } = event;
  return {
    specversion: '1.0',
    id: event.event_id,
    source: `/recovery-ledger/tenants/${encodeURIComponent(metadata.tenant)}`,
    type: `${CLOUDEVENT_TYPE_PREFIX}${event.type}`,
    subject: metadata.operation_ref,
    time: metadata.recorded_at,
    datacontenttype: 'application/json',
    data: event.data,
    chainhash: metadata.hash,
    chainprevhash: metadata.prev_hash,
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
