/**
 * The head witness against a real SQLite log (src/store/head-witness.ts): a witness behind the log
 * only lags; a log shorter than it, or holding another event at its head, was rolled back or
 * replaced; a witness edited without the anchor key is reported; and the settings refuse a witness
 * inside the data directory and an acceptance without a reason (docs/security.md, "A log rolled back").
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config/ledger-config';
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/store/hash-chain';
import { checkAgainstWitness, currentHead, readHeadWitness, writeHeadWitness } from '../../src/store/head-witness';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';

const KEY = 'w'.repeat(40);

async function append(store: SqliteEventStore, stream: string, count: number, label: string): Promise<void> {
  const anchored = await store.anchoredHead(stream);
  let head = anchored && { revision: anchored.revision, hash: anchored.hash };
  for (let n = 0; n < count; n++) {
    const sealed = sealEvents(stream, head, [newEvent('Appended', { label, n })]);
    await store.append(stream, head?.revision ?? NO_STREAM, sealed);
    head = { revision: (head?.revision ?? -1) + 1, hash: sealed[0].metadata.hash };
  }
}

describe('the head witness', () => {
  let dir: string;
  let stores: SqliteEventStore[];
  const open = (name: string) => {
    const store = SqliteEventStore.open({ file: join(dir, name), anchorKey: KEY });
    stores.push(store);
    return store;
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'head-witness-'));
    stores = [];
  });

  afterEach(async () => {
    for (const store of stores) await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds while the log grows past it, and finds a shorter log and another log of the same length', async () => {
    const store = open('events.sqlite');
    await append(store, 'op-t:a', 3, 'first');
    const file = join(dir, 'witness.json');
    await writeHeadWitness(file, await currentHead(store), '2026-12-04T00:00:00.000Z', KEY);
    const witness = readHeadWitness(file)!;
    expect(witness).toMatchObject({
      format: 'recovery-ledger-head-witness',
      position: 3,
      events: 3,
      last: { stream: 'op-t:a', revision: 2 },
    });
    expect((await checkAgainstWitness(store, witness, KEY)).findings).toEqual([]);

    await store.close();
    copyFileSync(join(dir, 'events.sqlite'), join(dir, 'older.sqlite'));
    const grown = open('events.sqlite');
    await append(grown, 'op-t:b', 2, 'later');
    // A witness behind the log only lags.
    expect((await checkAgainstWitness(grown, witness, KEY)).findings).toEqual([]);
    await writeHeadWitness(file, await currentHead(grown), '2026-12-04T00:01:00.000Z', KEY);
    const ahead = readHeadWitness(file)!;

    const older = open('older.sqlite');
    expect((await checkAgainstWitness(older, ahead, KEY)).findings.map((finding) => finding.kind)).toEqual([
      'log_behind_witness',
    ]);

    // The older copy grown again to the same length by other events: another log, not the one seen.
    await append(older, 'op-t:c', 2, 'other');
    expect((await checkAgainstWitness(older, ahead, KEY)).findings.map((finding) => finding.kind)).toEqual([
      'witness_entry_differs',
    ]);
  });

  it('reports a witness edited without the key', async () => {
    const store = open('events.sqlite');
    await append(store, 'op-t:a', 2, 'first');
    const file = join(dir, 'witness.json');
    await writeHeadWitness(file, await currentHead(store), '2026-12-04T00:00:00.000Z', KEY);
    const edited = { ...JSON.parse(readFileSync(file, 'utf8')), position: 1, events: 1 };
    writeFileSync(file, JSON.stringify(edited));
    const findings = (await checkAgainstWitness(store, readHeadWitness(file)!, KEY)).findings.map(
      (finding) => finding.kind,
    );
    expect(findings).toContain('witness_signature_invalid');
  });

  it('refuses a witness inside the data directory, and an acceptance without a reason', () => {
    const base = { LEDGER_DATA_DIR: join(dir, 'data') };
    expect(() => loadConfig({ ...base, LEDGER_HEAD_WITNESS_FILE: join(dir, 'data', 'witness.json') })).toThrow(
      ConfigError,
    );
    expect(
      loadConfig({ ...base, LEDGER_HEAD_WITNESS_FILE: join(dir, 'elsewhere', 'witness.json') }).headWitnessFile,
    ).toBe(join(dir, 'elsewhere', 'witness.json'));
    expect(() => loadConfig({ ...base, LEDGER_ACCEPT_ROLLBACK: '1' })).toThrow(/LEDGER_ACCEPT_ROLLBACK_REASON/);
    expect(
      loadConfig({ ...base, LEDGER_ACCEPT_ROLLBACK: '1', LEDGER_ACCEPT_ROLLBACK_REASON: 'disk lost' }).acceptRollback,
    ).toEqual({ reason: 'disk lost' });
  });
});
