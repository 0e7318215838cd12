import type { EventStore, StoredEvent } from '../store/event-store.port';
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
