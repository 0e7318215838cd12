/**
 * The anchors of the PostgreSQL event store (docs/postgres.md, "Integrity"): each stream's head,
 * moved by the append's own statement, and the log anchor, moved forward below the high-water
 * mark by whoever reads it. What only this store has to get right: a database of the previous
 * version starts and is anchored as it stands, once; an anchor removed is not started again;
 * instances appending and moving the anchor together agree on it; a head left behind by a cut
 * reads as one.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import { GENESIS_HASH, nextLogHash, sealEvents } from '../../src/integrity/hash-chain';
import { auditLog } from '../../src/integrity/log-audit';
import { verifyTail } from '../../src/integrity/verified-checkpoint';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreIntegrityError,
  type EventStore,
} from '../../src/store/event-store.port';
import { newEvent } from '../contract/event-store.contract';
import { genesisCheckpoint } from '../support/log-tampering';
import { describeWithPostgres } from '../support/postgres';

/** Appends `count` sealed events to `stream` at its head; answers the new head. */
async function grow(store: EventStore, stream: string, count: number): Promise<void> {
  const head = await store.anchoredHead(stream);
  const events = sealEvents(
    stream,
    head,
    Array.from({ length: count }, () => newEvent('Grown')),
  );
  await store.append(stream, head?.revision ?? NO_STREAM, events);
}

async function chainOf(store: EventStore): Promise<{ position: number; events: number; log_hash: string }> {
  let logHash = GENESIS_HASH;
  const all = await store.readAll({ after: 0, limit: 1_000_000 });
  for (const event of all)
    logHash = nextLogHash(logHash, { stream: event.stream, revision: event.revision, hash: event.metadata.hash });
  return { position: all[all.length - 1]?.position ?? 0, events: all.length, log_hash: logHash };
}

describeWithPostgres('the anchors of the PostgreSQL event store', (database) => {
  let copies = 0;
  /** A database of its own for one case, on the test file's server. */
  async function freshDatabase(): Promise<string> {
    const name = `${new URL(database().url).pathname.slice(1)}_a${++copies}`;
    const admin = new Client({ connectionString: database().adminUrl });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    const url = new URL(database().url);
    url.pathname = `/${name}`;
    return url.toString();
  }

  async function sql(url: string, text: string, values: unknown[] = []): Promise<void> {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(text, values);
    } finally {
      await client.end();
    }
  }

  it('starts on a database of the previous version, and anchors it as it stands', async () => {
    const url = await freshDatabase();
    const before = new PostgresEventStore({ connectionString: url });
    await grow(before, 'op:old-a', 3);
    await grow(before, 'op:old-b', 2);
    await grow(before, 'op:old-a', 1);
    await before.close();
    // What the previous version's schema had: no heads, no anchor.
    await sql(url, 'DROP TABLE ledger_log_anchor');
    await sql(url, 'DROP INDEX ledger_streams_bytewise');
    await sql(url, 'ALTER TABLE ledger_streams DROP COLUMN head_hash, DROP COLUMN head_position');

    const store = new PostgresEventStore({ connectionString: url });
    try {
      const a = await store.readStream('op:old-a');
      expect(await store.anchoredHead('op:old-a')).toEqual({
        stream: 'op:old-a',
        revision: 3,
        hash: a[3].metadata.hash,
        position: a[3].position,
      });
      expect(await store.logAnchor()).toMatchObject(await chainOf(store));
      const audit = await auditLog(store);
      expect(audit.findings).toEqual([]);
      expect(audit.anchored).toBe(true);
      // And it goes on from there: the next append is anchored with it.
      await grow(store, 'op:old-b', 1);
      expect((await store.anchoredHead('op:old-b'))?.revision).toBe(2);
      expect(await store.logAnchor()).toMatchObject(await chainOf(store));
    } finally {
      await store.close();
    }
  });

  it('does not start again an anchor that was removed: the log has events and no anchor', async () => {
    const url = await freshDatabase();
    const first = new PostgresEventStore({ connectionString: url });
    await grow(first, 'op:gone', 2);
    expect(await first.logAnchor()).toBeDefined();
    await first.close();
    await sql(url, 'DELETE FROM ledger_log_anchor');

    const store = new PostgresEventStore({ connectionString: url });
    try {
      expect(await store.logAnchor()).toBeUndefined();
      const audit = await auditLog(store);
      expect(audit.findings.map((finding) => finding.kind)).toContain('log_anchor_missing');
      const tail = await verifyTail(store, genesisCheckpoint());
      expect(tail.findings.map((finding) => finding.kind)).toContain('log_anchor_missing');
    } finally {
      await store.close();
    }
  });

  it('does not move on an anchor that does not hold under the anchor key', async () => {
    const url = await freshDatabase();
    const key = 'postgres-anchor-test-key-0123456789';
    const store = new PostgresEventStore({ connectionString: url, anchorKey: key });
    try {
      await grow(store, 'op:signed', 2);
      const signed = await store.logAnchor();
      expect(signed?.signature).toMatch(/^[0-9a-f]{64}$/);
      // Rewritten by someone without the key: kept as it is, and the check says so.
      await sql(url, `UPDATE ledger_log_anchor SET signature = repeat('a', 64)`);
      await grow(store, 'op:signed', 1);
      expect((await store.logAnchor())?.position).toBe(signed?.position);
      const audit = await auditLog(store, { anchorKey: key });
      expect(audit.findings.map((finding) => finding.kind)).toContain('anchor_signature_invalid');
    } finally {
      await store.close();
    }
  });

  it('agrees on one anchor when instances append and move it together', async () => {
    const url = await freshDatabase();
    const instances = [
      new PostgresEventStore({ connectionString: url }),
      new PostgresEventStore({ connectionString: url }),
    ];
    try {
      await Promise.all(
        instances.flatMap((store, index) =>
          Array.from({ length: 6 }, async (_, n) => {
            const stream = `op:together-${index}-${n}-${randomUUID().slice(0, 8)}`;
            for (let round = 0; round < 5; round++) {
              await grow(store, stream, 1 + (round % 3));
              if (round % 2 === 0) await store.logAnchor();
            }
          }),
        ),
      );
      const [one, two] = await Promise.all(instances.map((store) => store.logAnchor()));
      expect(one).toEqual(two);
      expect(one).toMatchObject(await chainOf(instances[0]));
      const audit = await auditLog(instances[1]);
      expect(audit.findings).toEqual([]);
      const tail = await verifyTail(instances[0], genesisCheckpoint());
      expect(tail.findings).toEqual([]);
      expect(tail.verified?.log_hash).toBe(one?.log_hash);
    } finally {
      await Promise.all(instances.map((store) => store.close()));
    }
  });

  it('reads a stream whose last events were cut with its head left behind, and refuses an append at its new end', async () => {
    const url = await freshDatabase();
    const store = new PostgresEventStore({ connectionString: url });
    try {
      await grow(store, 'op:cut', 3);
      await sql(url, `DELETE FROM ledger_events WHERE stream = 'op:cut' AND revision = 2`);
      // One statement: the ledger's decision read sees the cut (src/ledger/sealed-streams.ts refuses it).
      const { events, head } = await store.readStreamAnchored('op:cut');
      expect({ last: events[events.length - 1].revision, head: head?.revision }).toEqual({ last: 1, head: 2 });
      const folded = await store.readFoldStart('op:cut', { foldVersion: 'v1' });
      expect({ last: folded.events[folded.events.length - 1].revision, head: folded.head?.revision }).toEqual({
        last: 1,
        head: 2,
      });
      // Continued from what the stream now ends with: not the head's revision.
      const onCut = sealEvents('op:cut', { revision: 1, hash: events[1].metadata.hash }, [newEvent('After')]);
      await expect(store.append('op:cut', 1, onCut)).rejects.toBeInstanceOf(RevisionConflictError);
      // At the head's revision but not chained from its hash.
      const unchained = sealEvents('op:cut', { revision: 2, hash: events[1].metadata.hash }, [newEvent('After')]);
      await expect(store.append('op:cut', 2, unchained)).rejects.toBeInstanceOf(StoreIntegrityError);
      expect((await store.readStream('op:cut')).length).toBe(2);
    } finally {
      await store.close();
    }
  });
});
