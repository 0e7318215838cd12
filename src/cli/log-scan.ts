import type { EventStore, StoredEvent } from '../store/event-store.port';
import { verifyChain, type ChainBreak } from '../store/hash-chain';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';

const PAGE = 1000;

/** Reads the ledger's part of the global log in pages, in order, up to `until` (inclusive) if given. */
export async function scanLog(
  store: EventStore,
  onPage: (events: StoredEvent[]) => void | Promise<void>,
  { after = 0, until }: { after?: number; until?: number } = {},
): Promise<void> {
  let position = after;
  for (;;) {
    const page = await store.readAll({ after: position, limit: PAGE, streamPrefix: OPERATION_STREAM_PREFIX });
    const kept = until === undefined ? page : page.filter((event) => event.position <= until);
    if (kept.length > 0) await onPage(kept);
    if (page.length < PAGE || kept.length < page.length) return;
    position = page[page.length - 1].position;
  }
}

export interface StreamAudit {
  stream: string;
  events: number;
  /** The hash of the stream's last event: what the next append must chain from. */
  last_hash: string;
  break?: ChainBreak;
}

export interface LogAudit {
  events: number;
  streams: StreamAudit[];
  breaks: ChainBreak[];
}

/**
 * Re-computes every stream's hash chain (src/store/hash-chain.ts) from the stored events. Streams
 * are listed from the global log and then read whole, so each chain is checked from revision 0 by
 * the same function the tests of the chain itself use.
 */
export async function auditLog(store: EventStore, onStream?: (audit: StreamAudit) => void): Promise<LogAudit> {
  const names = new Set<string>();
  await scanLog(store, (page) => {
    for (const event of page) names.add(event.stream);
  });
  const streams: StreamAudit[] = [];
  let events = 0;
  for (const stream of names) {
    const stored = await store.readStream(stream);
    const found = verifyChain(stored);
    const audit: StreamAudit = {
      stream,
      events: stored.length,
      last_hash: stored.length === 0 ? '' : stored[stored.length - 1].metadata.hash,
      ...(found ? { break: found } : {}),
    };
    events += stored.length;
    streams.push(audit);
    onStream?.(audit);
  }
  return { events, streams, breaks: streams.flatMap((audit) => (audit.break ? [audit.break] : [])) };
}
