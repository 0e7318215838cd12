import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Projection } from '@recovery-ledger/projections';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';

interface CounterDoc {
  count: number;
  position: number;
  items: string[];
}

const counters: Projection<CounterDoc> = {
  name: 'counters',
  version: 1,
  keyOf: (event) => event.stream,
  evolve: (doc, event) => ({
    count: (doc?.count ?? 0) + 1,
    position: event.position,
    items: [...(doc?.items ?? []), event.event_id],
  }),
};

/**
 * Readers are served parsed documents from memory; these are the ways a cached document could go
 * stale or be changed under another reader, each of which must not happen.
 */
describe('read model: the parsed documents readers are served', () => {
  let dir: string;
  const opened: SqliteReadModel[] = [];
  const open = (options: { readCacheBytes?: number } = {}) => {
    const readModel = SqliteReadModel.open({ file: join(dir, 'read-models.sqlite'), ...options });
    readModel.register(counters);
    opened.push(readModel);
    return readModel;
  };
  const write = (readModel: SqliteReadModel, key: string, doc: CounterDoc) =>
    readModel.transaction(() => readModel.writeDoc('counters', key, doc));

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-read-cache-'));
  });

  afterEach(() => {
    for (const readModel of opened.splice(0)) readModel.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the same object while the document is unchanged, and the new one once this connection writes it', () => {
    const readModel = open();
    write(readModel, 'a', { count: 1, position: 1, items: ['e1'] });
    const first = readModel.getDoc<CounterDoc>('counters', 'a');
    expect(readModel.getDoc('counters', 'a')).toBe(first);

    write(readModel, 'a', { count: 2, position: 2, items: ['e1', 'e2'] });
    expect(readModel.getDoc('counters', 'a')).toEqual({ count: 2, position: 2, items: ['e1', 'e2'] });
  });

  it('sees what another connection (another process on the file) committed', () => {
    const reader = open();
    const writer = open();
    write(writer, 'a', { count: 1, position: 1, items: ['e1'] });
    expect(reader.getDoc('counters', 'a')).toEqual({ count: 1, position: 1, items: ['e1'] });

    write(writer, 'a', { count: 5, position: 9, items: ['e9'] });
    expect(reader.getDoc('counters', 'a')).toEqual({ count: 5, position: 9, items: ['e9'] });
    writer.transaction(() => writer.reset('counters'));
    expect(reader.getDoc('counters', 'a')).toBeUndefined();
  });

  it('keeps serving a parsed document while another connection writes only other documents', () => {
    const reader = open();
    const writer = open();
    write(writer, 'a', { count: 1, position: 1, items: ['e1'] });
    const first = reader.getDoc<CounterDoc>('counters', 'a');
    // The projection thread writing another tenant's documents: this one is not parsed again.
    write(writer, 'b', { count: 1, position: 2, items: ['e2'] });
    expect(reader.getDoc('counters', 'a')).toBe(first);
  });

  it('sees a document changed in the file by hand (no stamp written), and does not keep it', () => {
    const reader = open();
    const writer = open();
    write(writer, 'a', { count: 1, position: 1, items: ['e1'] });
    expect(reader.getDoc('counters', 'a')).toEqual({ count: 1, position: 1, items: ['e1'] });
    const db = new Database(join(dir, 'read-models.sqlite'));
    db.prepare("UPDATE rm_counters SET doc = json_set(doc, '$.count', 7) WHERE key = 'a'").run();
    db.close();
    const changed = reader.getDoc<CounterDoc>('counters', 'a');
    expect(changed?.count).toBe(7);
    expect(reader.getDoc('counters', 'a')).not.toBe(changed);
  });

  it('forgets everything on a reset by this connection', () => {
    const readModel = open();
    write(readModel, 'a', { count: 1, position: 1, items: [] });
    expect(readModel.getDoc('counters', 'a')).toBeDefined();
    readModel.reset('counters');
    expect(readModel.getDoc('counters', 'a')).toBeUndefined();
  });

  it('hands out frozen documents, so no reader can change what the next one gets', () => {
    const readModel = open();
    write(readModel, 'a', { count: 1, position: 1, items: ['e1'] });
    const doc = readModel.getDoc<CounterDoc>('counters', 'a') as CounterDoc;
    expect(() => doc.items.push('e2')).toThrow(TypeError);
    expect(() => {
      doc.count = 7;
    }).toThrow(TypeError);
    expect(readModel.getDoc('counters', 'a')).toEqual({ count: 1, position: 1, items: ['e1'] });
  });

  it('keeps within its byte bound, least recently read out first, and still answers every document', () => {
    const readModel = open({ readCacheBytes: 4_000 });
    const items = (n: number) => Array.from({ length: 20 }, (_, i) => `item_${n}_${i}`);
    for (let n = 0; n < 50; n++) write(readModel, `k${n}`, { count: n, position: n, items: items(n) });
    const kept = readModel.getDoc('counters', 'k0');
    for (let n = 0; n < 50; n++)
      expect(readModel.getDoc('counters', `k${n}`)).toEqual({ count: n, position: n, items: items(n) });
    // k0 was read first, so it went out to stay within 4,000 bytes: the next read parses it again.
    expect(readModel.getDoc('counters', 'k0')).not.toBe(kept);
    expect(readModel.getDoc('counters', 'k0')).toEqual(kept);
  });

  it('keeps no document larger than a quarter of its bound, and such a read evicts nothing', () => {
    const readModel = open({ readCacheBytes: 4_000 });
    write(readModel, 'small', { count: 1, position: 1, items: ['e1'] });
    const big = { count: 2, position: 2, items: Array.from({ length: 100 }, (_, i) => `item_${i}`) };
    write(readModel, 'big', big);
    const small = readModel.getDoc('counters', 'small');
    const first = readModel.getDoc('counters', 'big');
    expect(first).toEqual(big);
    expect(readModel.getDoc('counters', 'big')).not.toBe(first);
    expect(readModel.getDoc('counters', 'small')).toBe(small);
  });
});
