/**
 * Stored metadata is read, not cast: a row whose metadata lacks a field the ledger writes is refused
 * where it is read (as an integrity fault naming its position), on either adapter.
 */
import Database from 'better-sqlite3';
import type { ResolvedEvent } from '@eventstore/db-client';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NO_STREAM, StoreIntegrityError } from '../../src/store/event-store.port';
import { toStoredEvent, UnexpectedStoredEventError } from '../../src/adapters/eventstoredb/eventstoredb-event-codec';
import { sealEvents } from '../../src/integrity/hash-chain';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

describe('metadata without the fields the ledger writes', () => {
  it('is refused by the SQLite adapter where the row is read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ledger-metadata-'));
    const file = join(dir, 'events.sqlite');
    const store = SqliteEventStore.open({ file });
    try {
      const stream = 'op-acme:run/meta';
      await store.append(stream, NO_STREAM, sealEvents(stream, undefined, [newEvent('A'), newEvent('B')]));
      const other = new Database(file);
      other
        .prepare("UPDATE events SET metadata = json_remove(metadata, '$.tenant') WHERE stream = ? AND revision = 1")
        .run(stream);
      other.close();
      const refused = await store.readStream(stream).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(StoreIntegrityError);
      expect((refused as StoreIntegrityError).position).toBe(2);
      expect((refused as Error).message).toMatch(/lacks the fields the ledger writes/);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is refused by the EventStoreDB codec', () => {
    const { metadata } = sealEvents('op-acme:run/meta', undefined, [newEvent('A')])[0];
    const resolved = (meta: Record<string, unknown>) =>
      ({
        event: {
          streamId: 'op-acme:run/meta',
          revision: 0n,
          position: { commit: 10n, prepare: 10n },
          id: 'e1',
          type: 'A',
          isJson: true,
          data: {},
          metadata: meta,
        },
        commitPosition: 10n,
      }) as unknown as ResolvedEvent;
    expect(toStoredEvent(resolved(metadata as unknown as Record<string, unknown>)).metadata).toEqual(metadata);
    const { hash: _dropped, ...withoutHash } = metadata;
    expect(() => toStoredEvent(resolved(withoutHash))).toThrow(UnexpectedStoredEventError);
  });
});
