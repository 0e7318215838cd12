/**
 * The head witness against a real SQLite log (src/integrity/head-witness.ts): a witness behind the log
 * only lags; a log shorter than it, or holding another event at its head, was rolled back or
 * replaced; a witness edited without the anchor key is reported; and the settings refuse a witness
 * inside the data directory and an acceptance without a reason (docs/security.md, "A log rolled back").
 */
import { copyFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config/ledger-config';
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { checkAgainstWitness, currentHead, readHeadWitness, writeHeadWitness } from '../../src/integrity/head-witness';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';
import { startLedgerInProcess } from '../support/ledger-in-process';

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

describe('the head witness by default, on the embedded SQLite store', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'head-witness-default-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is kept outside the data directory, in the state directory, one per log; `off` turns it off', () => {
    const base = { LEDGER_DATA_DIR: join(dir, 'data'), XDG_STATE_HOME: join(dir, 'state') };
    const file = loadConfig(base).headWitnessFile;
    expect(file).toMatch(new RegExp(`^${join(dir, 'state', 'recovery-ledger')}/head-witness-[0-9a-f]{16}\\.json$`));
    expect(loadConfig({ ...base, LEDGER_DATA_DIR: join(dir, 'other') }).headWitnessFile).not.toBe(file);
    expect(loadConfig({ ...base, LEDGER_HEAD_WITNESS_FILE: 'off' }).headWitnessFile).toBeUndefined();
    // EventStoreDB keeps no log in the data directory: the witness stays opt-in there.
    expect(
      loadConfig({
        ...base,
        LEDGER_STORE: 'eventstoredb',
        EVENTSTORE_CONNECTION_STRING: 'esdb://127.0.0.1:2113?tls=false',
      }).headWitnessFile,
    ).toBeUndefined();
  });

  it('sees the whole data directory restored from an older copy, with no setting at all', async () => {
    const dataDir = join(dir, 'data');
    const env = { XDG_STATE_HOME: join(dir, 'state'), LEDGER_HEAD_WITNESS_INTERVAL_MS: '10' };
    const plan = async (baseUrl: string, ref: string) =>
      (
        await fetch(`${baseUrl}/v1/operations/${encodeURIComponent(ref)}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            events: [
              {
                event_id: randomUUID(),
                type: 'StepPlanned',
                data: { run_id: 'run_w', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:in-1' },
              },
            ],
          }),
        })
      ).json() as Promise<{ code?: string; revision?: number }>;

    let ledger = await startLedgerInProcess({ dataDir, env });
    expect(await plan(ledger.baseUrl, 'run_w/step_1')).toMatchObject({ revision: expect.any(Number) });
    await ledger.stop();
    cpSync(dataDir, join(dir, 'backup'), { recursive: true });

    ledger = await startLedgerInProcess({ dataDir, env });
    expect(await plan(ledger.baseUrl, 'run_w/step_2')).toMatchObject({ revision: expect.any(Number) });
    await ledger.stop();

    rmSync(dataDir, { recursive: true, force: true });
    cpSync(join(dir, 'backup'), dataDir, { recursive: true });
    ledger = await startLedgerInProcess({ dataDir, env });
    try {
      expect(await plan(ledger.baseUrl, 'run_w/step_3')).toMatchObject({ code: 'HISTORY_ROLLED_BACK' });
    } finally {
      await ledger.stop();
    }
    expect(existsSync(join(dir, 'state', 'recovery-ledger'))).toBe(true);

    // A data directory emptied on purpose (docs/sdk.md's walkthrough does) is a new log, not a rollback.
    rmSync(dataDir, { recursive: true, force: true });
    ledger = await startLedgerInProcess({ dataDir, env });
    try {
      expect(await plan(ledger.baseUrl, 'run_w/step_4')).toMatchObject({ revision: expect.any(Number) });
    } finally {
      await ledger.stop();
    }
  });
});
