/**
 * The whole-log audit holds a page of stream names and heads at a time, not every stream of the log
 * (docs/scaling.md, "Memory"): the names the pass meets are spilled out of the heap and merged, in
 * name order, with the anchored heads read a page at a time. Every finding of the whole-set audit is
 * still made across page boundaries: a stream with no head, a head with no stream.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { auditLog } from '../../src/integrity/log-audit';
import { STREAM_PAGE } from '../../src/integrity/stream-pages';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

const STREAMS = Math.round(STREAM_PAGE * 2.5);
const name = (n: number) => `op-acme:run/s_${String(n).padStart(5, '0')}`;

describe('the audit over more streams than a page', () => {
  let dir: string;
  let file: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-audit-pages-'));
    file = join(dir, 'events.sqlite');
    const store = SqliteEventStore.open({ file });
    for (let n = 0; n < STREAMS; n++)
      await store.append(name(n), NO_STREAM, sealEvents(name(n), undefined, [newEvent('A'), newEvent('B')]));
    await store.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the heads a page at a time, never all at once, and keeps no list of streams when asked not to', async () => {
    const store = SqliteEventStore.open({ file });
    try {
      const pages: number[] = [];
      const page = store.anchoredHeadsPage.bind(store);
      store.anchoredHeadsPage = async (prefix: string, after: string, limit: number) => {
        const heads = await page(prefix, after, limit);
        pages.push(heads.length);
        return heads;
      };
      store.anchoredHeads = () => Promise.reject(new Error('every head at once'));
      const audit = await auditLog(store, { keepStreams: false });
      expect(audit.findings).toEqual([]);
      expect(audit.stream_count).toBe(STREAMS);
      expect(audit.events).toBe(STREAMS * 2);
      expect(audit.streams).toEqual([]);
      expect(pages.length).toBe(Math.ceil(STREAMS / STREAM_PAGE));
      expect(Math.max(...pages)).toBeLessThanOrEqual(STREAM_PAGE);
    } finally {
      await store.close();
    }
  });

  it('finds a stream with no head and a head with no stream, on either side of a page boundary', async () => {
    const copy = join(dir, 'tampered.sqlite');
    const source = new Database(file);
    await source.backup(copy);
    source.close();
    const db = new Database(copy);
    db.prepare('DELETE FROM stream_heads WHERE stream = ?').run(name(STREAM_PAGE - 1));
    db.prepare('DELETE FROM events WHERE stream = ?').run(name(STREAM_PAGE + 1));
    db.close();
    const store = SqliteEventStore.open({ file: copy });
    try {
      const audit = await auditLog(store, { keepStreams: false });
      expect(audit.findings.filter((finding) => finding.stream !== undefined)).toEqual([
        expect.objectContaining({ kind: 'missing_head', stream: name(STREAM_PAGE - 1) }),
        expect.objectContaining({ kind: 'stream_deleted', stream: name(STREAM_PAGE + 1) }),
      ]);
      expect(audit.stream_count).toBe(STREAMS - 1);
    } finally {
      await store.close();
    }
  });
});
