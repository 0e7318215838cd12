/**
 * `recovery-ledger export`, `import` and `verify` on data directories: a log exported, imported
 * into a fresh store and verified is the same log, an import runs twice without writing twice,
 * and a byte changed in the database or in the file is found and named.
 */
import Database from 'better-sqlite3';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { operationStream } from '../../src/store/stream-names';
import { openSeeder, runCli, seedIncident, tempDataDir } from '../support/cli-harness';

const dirs: string[] = [];
const fresh = (label: string) => {
  const dir = tempDataDir(label);
  dirs.push(dir);
  return dir;
};

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function seeded(label: string): Promise<string> {
  const dir = fresh(label);
  const seeder = await openSeeder(dir);
  await seedIncident(seeder);
  await seeder.close();
  return dir;
}

/** Every row of the events table, in log order, through a read-only connection. */
function rows(dir: string): unknown[] {
  const db = new Database(join(dir, 'events.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare('SELECT position, stream, revision, event_id, type, data, metadata FROM events ORDER BY position')
      .all();
  } finally {
    db.close();
  }
}

describe('export, import, verify', () => {
  let source: string;
  let file: string;

  beforeAll(async () => {
    source = await seeded('export-source');
    file = join(fresh('export-file'), 'ledger.ndjson');
  });

  it('export writes NDJSON: a header, every event with its hashes, a footer that counts them', () => {
    const run = runCli(['export', '--data-dir', source, '--out', file]);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(`exported 23 events in 3 streams to ${file}\n`);
    const lines = readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines[0]).toMatchObject({ kind: 'header', format: 'recovery-ledger-log', version: 1, head_position: 23 });
    const footer = lines[lines.length - 1];
    expect(footer).toMatchObject({
      kind: 'footer',
      events: 23,
      streams: 3,
      last_position: 23,
      log_anchor: { position: 23, events: 23 },
    });
    // The anchored head of every stream travels with the file, for an offline verifier.
    expect(footer.heads.map((head: { stream: string }) => head.stream)).toEqual([
      'op-default:run_81/step_4',
      'op-default:run_81/step_5',
      'op-default:run_82/step_1',
    ]);
    const events = lines.slice(1, -1);
    expect(events).toHaveLength(23);
    for (const event of events) {
      expect(event.kind).toBe('event');
      expect(event.metadata.hash).toMatch(/^[0-9a-f]{64}$/);
      expect(event.metadata.prev_hash).toMatch(/^[0-9a-f]{64}$/);
    }
    // Without --out it goes to stdout, the same events.
    const piped = runCli(['export', '--data-dir', source]);
    expect(piped.status).toBe(0);
    expect(piped.stdout.split('\n').slice(1, -2)).toEqual(readFileSync(file, 'utf8').split('\n').slice(1, -2));
  });

  it('import into a fresh store gives the same log, and verify passes on it', () => {
    const target = fresh('import-target');
    const run = runCli(['import', file, '--data-dir', target]);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(
      'imported 23 events (0 already present); the store holds 23 events in 3 streams, counts and hash chains match the file\n',
    );
    expect(rows(target)).toEqual(rows(source));
    const verify = runCli(['verify', '--data-dir', target]);
    expect(verify.status).toBe(0);
    expect(verify.stdout).toBe('verified 23 events in 3 streams: every hash chain holds\n');
  });

  it('import is idempotent: a second run writes nothing and says so', () => {
    const target = fresh('import-twice');
    expect(runCli(['import', file, '--data-dir', target]).status).toBe(0);
    const before = rows(target);
    const again = runCli(['import', file, '--data-dir', target]);
    expect(again.status).toBe(0);
    expect(again.stdout).toMatch(/^imported 0 events \(23 already present\)/);
    expect(rows(target)).toEqual(before);
  });

  it('import reads stdin with -', () => {
    const target = fresh('import-stdin');
    const run = runCli(['import', '-', '--data-dir', target], {}, readFileSync(file, 'utf8'));
    expect(run.status).toBe(0);
    expect(rows(target)).toEqual(rows(source));
  });

  it('import refuses a store that holds other events, and writes nothing to it', async () => {
    const other = fresh('import-other');
    const seeder = await openSeeder(other, { start: '2025-04-01T00:00:00.000Z' });
    await seeder.submit('run_9/step_1', 'StepPlanned', {
      run_id: 'run_9',
      tool: 'send_email',
      side_effect: 'write',
      input_hash: 'sha256:cc01',
    });
    await seeder.close();
    const before = rows(other);
    const run = runCli(['import', file, '--data-dir', other]);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/the target store is not empty: it holds op-default:run_9\/step_1 revision 0/);
    expect(rows(other)).toEqual(before);
  });

  it('import refuses a file whose events were edited, names the event, and writes nothing', () => {
    const tampered = join(fresh('import-tampered-file'), 'tampered.ndjson');
    const text = readFileSync(file, 'utf8');
    expect(text.split('inv_123').length - 1).toBeGreaterThan(0);
    // One edited byte in the verification's evidence: the event's hash no longer matches it.
    const lines = text.split('\n');
    const index = lines.findIndex((line) => line.includes('"type":"VerificationRecorded"'));
    const edited = JSON.parse(lines[index]);
    lines[index] = lines[index].replace('"evidence_ref":"inv_123"', '"evidence_ref":"inv_124"');
    writeFileSync(tampered, lines.join('\n'));
    const target = fresh('import-tampered');
    const run = runCli(['import', tampered, '--data-dir', target]);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(
      `operation run_81/step_4 (tenant default): first bad event ${edited.event_id} at revision 7, hash_mismatch`,
    );
    expect(run.stderr).toContain('nothing was imported');
    expect(existsSync(join(target, 'events.sqlite'))).toBe(false);
  });

  it('import refuses a file that was cut short', () => {
    const cut = join(fresh('import-cut-file'), 'cut.ndjson');
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    writeFileSync(cut, `${lines.slice(0, 10).join('\n')}\n`);
    const run = runCli(['import', cut, '--data-dir', fresh('import-cut')]);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/no footer; the file was cut short \(9 events read\)/);
  });

  it('import refuses a file whose footer or event metadata is not of the format, with a typed message and nothing written', () => {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    const footer = JSON.parse(lines[lines.length - 1]);
    const badFooter = join(fresh('import-bad-footer-file'), 'bad-footer.ndjson');
    writeFileSync(
      badFooter,
      `${[...lines.slice(0, -1), JSON.stringify({ ...footer, heads: 'all of them' })].join('\n')}\n`,
    );
    const footerRun = runCli(['import', badFooter, '--data-dir', fresh('import-bad-footer')]);
    expect(footerRun.status).toBe(1);
    expect(footerRun.stderr).toContain(`bad-footer.ndjson:${lines.length}: not a footer of this format`);

    const event = JSON.parse(lines[1]);
    const badMetadata = join(fresh('import-bad-metadata-file'), 'bad-metadata.ndjson');
    writeFileSync(
      badMetadata,
      `${[lines[0], JSON.stringify({ ...event, metadata: { ...event.metadata, tenant: 7 } }), ...lines.slice(2)].join('\n')}\n`,
    );
    const metadataRun = runCli(['import', badMetadata, '--data-dir', fresh('import-bad-metadata')]);
    expect(metadataRun.status).toBe(1);
    expect(metadataRun.stderr).toContain('bad-metadata.ndjson:2: not an event of this format');
  });
});

describe('verify on a database edited behind the ledger', () => {
  it('names the first event whose hash no longer matches, and exits 1', async () => {
    const dir = await seeded('verify-edited');
    const databaseFile = join(dir, 'events.sqlite');
    // Closing the last connection checkpointed the WAL: every row is in the main file.
    expect(existsSync(`${databaseFile}-wal`)).toBe(false);
    const bytes = readFileSync(databaseFile);
    const needle = Buffer.from('I need a valid recipient address');
    const at = bytes.indexOf(needle);
    expect(at).toBeGreaterThan(0);
    expect(bytes.indexOf(needle, at + 1)).toBe(-1);
    bytes[at + 'I need a '.length] = 'V'.charCodeAt(0);
    writeFileSync(databaseFile, bytes);

    const store = SqliteEventStore.open({ file: databaseFile });
    const stream = await store.readStream(operationStream('default', 'run_82/step_1'));
    await store.close();
    const edited = stream.find((event) => event.type === 'EnvelopeRecorded');
    expect(JSON.stringify(edited?.data)).toContain('I need a Valid recipient address');

    const run = runCli(['verify', '--data-dir', dir]);
    expect(run.status).toBe(1);
    expect(run.stdout).toBe(
      `BROKEN operation run_82/step_1 (tenant default): first bad event ${edited?.event_id} at revision ${edited?.revision}, hash_mismatch: ` +
        'its content no longer hashes to its recorded hash: the event was changed after it was written\n' +
        'verified 23 events in 3 streams: 1 broken\n',
    );
    expect(run.stderr).toBe('recovery-ledger: 1 of 3 streams fails its hash chain\n');
    const json = JSON.parse(runCli(['verify', '--data-dir', dir, '--json']).stdout);
    expect(json).toMatchObject({
      ok: false,
      events: 23,
      streams: 3,
      breaks: [{ stream: 'op-default:run_82/step_1', event_id: edited?.event_id, reason: 'hash_mismatch' }],
    });
  });

  it('passes on the untouched store', async () => {
    const dir = await seeded('verify-clean');
    const run = runCli(['verify', '--data-dir', dir]);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe('verified 23 events in 3 streams: every hash chain holds\n');
  });
});
