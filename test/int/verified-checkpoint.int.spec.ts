/**
 * The start-up check from the last verified checkpoint (docs/reliability.md, "Start-up without a
 * full pass"): it reads only what was appended after the checkpoint, and still refuses every damage
 * the whole-log audit finds in that part, a log cut below the checkpoint, and a checkpoint forged
 * without the anchor key. Each damage is one of test/support/log-tampering.ts's, on a real events file.
 */
import Database from 'better-sqlite3';
import { copyFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { StoreUnavailableError } from '../../src/store/event-store.port';
import { ledgerEventProblem } from '../../src/integrity/integrity-monitor';
import { GENESIS_HASH } from '../../src/integrity/hash-chain';
import { auditLog } from '../../src/integrity/log-audit';
import { CheckpointKeeper, STOP_MOVE_MS } from '../../src/integrity/checkpoint-keeper';
import type { IntegrityFinding } from '../../src/integrity/log-audit';
import {
  readVerifiedCheckpoint,
  verifyTail,
  writeVerifiedCheckpoint,
  type VerifiedCheckpoint,
} from '../../src/integrity/verified-checkpoint';
import { openSeeder, tempDataDir } from '../support/cli-harness';
import { untilTrue } from '../support/until';
import { genesisCheckpoint, seededLogDir, TAMPER_CASES, TARGET_REF } from '../support/log-tampering';

const KEY = 'verified-checkpoint-test-key-0123456789';

function copyOf(dir: string): string {
  const copy = tempDataDir('tail-copy');
  for (const suffix of ['', '-wal', '-shm'])
    if (existsSync(join(dir, `events.sqlite${suffix}`)))
      copyFileSync(join(dir, `events.sqlite${suffix}`), join(copy, `events.sqlite${suffix}`));
  return copy;
}

describe('the check of what follows the last verified checkpoint', () => {
  let clean: string;
  let cleanWithKey: string;
  const dirs: string[] = [];

  beforeAll(async () => {
    clean = await seededLogDir('tail');
    cleanWithKey = await seededLogDir('tail', KEY);
    dirs.push(clean, cleanWithKey);
  });
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('passes a clean log and ends at its anchor, reading only what follows the checkpoint', async () => {
    const store = SqliteEventStore.open({ file: join(clean, 'events.sqlite') });
    try {
      const anchor = await store.logAnchor();
      const whole = await verifyTail(store, genesisCheckpoint(), { checkEvent: ledgerEventProblem });
      expect(whole.findings).toEqual([]);
      expect(whole.verified).toMatchObject({
        position: anchor?.position,
        events: anchor?.events,
        log_hash: anchor?.log_hash,
      });
      expect(whole.events_read).toBe(anchor?.events);

      // From a checkpoint at the head: the event it recorded, nothing else.
      const atHead = { ...genesisCheckpoint(), ...whole.verified } as VerifiedCheckpoint;
      const nothing = await verifyTail(store, atHead, { checkEvent: ledgerEventProblem });
      expect(nothing.ok).toBe(true);
      expect(nothing.events_read).toBe(1);
    } finally {
      await store.close();
    }
  });

  it('agrees with the whole-log audit on a checkpoint it records after a clean audit', async () => {
    const store = SqliteEventStore.open({ file: join(clean, 'events.sqlite') });
    try {
      const audit = await auditLog(store, { checkEvent: ledgerEventProblem });
      expect(audit.ok).toBe(true);
      const check = await verifyTail(store, genesisCheckpoint());
      expect(check.verified?.log_hash).toBe(audit.recomputed.log_hash);
      expect(check.verified?.events).toBe(audit.recomputed.events);
    } finally {
      await store.close();
    }
  });

  // Every damage the audit is proven to find, made after the checkpoint: refused by the tail check too.
  for (const tamper of TAMPER_CASES) {
    it(`refuses ${tamper.name} after the checkpoint`, async () => {
      const source = tamper.needsAnchorKey ? cleanWithKey : clean;
      const dir = copyOf(source);
      dirs.push(dir);
      const db = new Database(join(dir, 'events.sqlite'));
      tamper.apply(db);
      db.close();
      const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
      try {
        const check = await verifyTail(store, genesisCheckpoint(), {
          checkEvent: ledgerEventProblem,
          ...(tamper.needsAnchorKey ? { anchorKey: KEY } : {}),
        });
        expect(check.ok).toBe(false);
        expect(check.verified).toBeUndefined();
      } finally {
        await store.close();
      }
    });
  }

  it('refuses a log cut below the checkpoint, and one whose checkpointed event was replaced', async () => {
    const dir = copyOf(clean);
    dirs.push(dir);
    const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
    const anchor = await store.logAnchor();
    const check = await verifyTail(store, genesisCheckpoint());
    await store.close();
    const atHead = { ...genesisCheckpoint(), ...check.verified } as VerifiedCheckpoint;

    // Further on than the log: the log lost what was verified (a rollback of the log file).
    const reopened = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
    try {
      const ahead = await verifyTail(reopened, {
        ...atHead,
        position: (anchor?.position ?? 0) + 5,
        events: (anchor?.events ?? 0) + 5,
      });
      expect(ahead.findings.map((finding) => finding.kind)).toContain('log_anchor_mismatch');
      const replaced = await verifyTail(reopened, { ...atHead, last: { ...atHead.last!, hash: 'f'.repeat(64) } });
      expect(replaced.findings.map((finding) => finding.kind)).toContain('checkpoint_mismatch');
    } finally {
      await reopened.close();
    }
  });

  it('refuses a checkpoint not signed with the anchor key, and keeps one written with it', async () => {
    const dir = copyOf(cleanWithKey);
    dirs.push(dir);
    const file = join(dir, 'verified-checkpoint.json');
    const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite'), anchorKey: KEY });
    try {
      const first = await verifyTail(store, genesisCheckpoint(), { anchorKey: KEY }).catch(() => undefined);
      // The genesis checkpoint above is unsigned: with a key it is not believed.
      expect(first?.findings.map((finding) => finding.kind)).toContain('checkpoint_mismatch');
      const whole = await verifyTail(store, { ...genesisCheckpoint() });
      const written = writeVerifiedCheckpoint(
        file,
        {
          ...(whole.verified as NonNullable<typeof whole.verified>),
          by: 'audit',
          verified_at: '2026-01-01T00:00:00.000Z',
        },
        KEY,
      );
      expect(readVerifiedCheckpoint(file)).toEqual(written);
      expect((await verifyTail(store, written, { anchorKey: KEY })).ok).toBe(true);
      // Moved back to the start, to have the whole log skipped or re-read on someone else's terms: refused.
      const forged = { ...written, position: 0, events: 0, log_hash: GENESIS_HASH };
      delete (forged as Partial<VerifiedCheckpoint>).last;
      const refused = await verifyTail(store, forged, { anchorKey: KEY });
      expect(refused.findings.map((finding) => finding.kind)).toContain('checkpoint_mismatch');
    } finally {
      await store.close();
    }
  });

  it('names the damaged stream, so only it is refused', async () => {
    const dir = copyOf(clean);
    dirs.push(dir);
    const tamper = TAMPER_CASES.find((entry) => entry.name === 'an event edited in place');
    const db = new Database(join(dir, 'events.sqlite'));
    tamper?.apply(db);
    db.close();
    const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
    try {
      const check = await verifyTail(store, genesisCheckpoint());
      expect(check.broken_streams).toEqual([`op-default:${TARGET_REF}`]);
    } finally {
      await store.close();
    }
  });

  describe('kept by the service', () => {
    function keeper(store: SqliteEventStore, dir: string, found: IntegrityFinding[]) {
      return new CheckpointKeeper({
        store,
        file: join(dir, 'verified-checkpoint.json'),
        checkEvent: ledgerEventProblem,
        now: () => new Date('2026-01-01T00:00:00.000Z'),
        intervalMs: 60_000,
        pause: () => Promise.resolve(),
        onFindings: (findings) => found.push(...findings),
        onError: (error) => {
          throw error;
        },
      });
    }

    /** A log audited clean and checkpointed, then one more operation of three events appended. */
    async function checkpointedThenGrown(): Promise<string> {
      const dir = copyOf(clean);
      dirs.push(dir);
      const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
      await keeper(store, dir, []).afterAudit(await auditLog(store, { checkEvent: ledgerEventProblem }));
      await store.close();
      const seeder = await openSeeder(dir, { start: '2025-03-02T09:00:00.000Z' });
      const plan = { run_id: 'run_90', tool: 'send_email', side_effect: 'write', input_hash: 'sha256:90' };
      await seeder.submit('run_90/step_1', 'StepPlanned', plan);
      await seeder.submit('run_90/step_1', 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:90' });
      await seeder.close();
      return dir;
    }

    it('reads only what was appended after the checkpoint, and moves it up', async () => {
      const dir = await checkpointedThenGrown();
      const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
      try {
        const found: IntegrityFinding[] = [];
        const kept = keeper(store, dir, found);
        const before = readVerifiedCheckpoint(join(dir, 'verified-checkpoint.json'));
        const check = await kept.checkAtStart();
        expect(check).toMatchObject({ state: 'verified', from: before?.position });
        // The checkpointed event and the ones appended after it (one new stream: nothing before them).
        const appended = ((await store.logAnchor())?.events ?? 0) - (before?.events ?? 0);
        expect(appended).toBeGreaterThan(0);
        expect(check.state === 'verified' && check.events_read).toBe(appended + 1);
        expect(found).toEqual([]);
        expect(readVerifiedCheckpoint(join(dir, 'verified-checkpoint.json'))?.position).toBe(
          (await store.logAnchor())?.position,
        );
      } finally {
        await store.close();
      }
    });

    /**
     * A log audited clean and checkpointed by a keeper that stays open, then grown by two events, then
     * the keeper stopped. Each page the store reads moves the keeper's clock by `readCostMs`.
     */
    async function stoppedAfterGrowth(
      readCostMs: number,
      pausedCheck = false,
    ): Promise<{ before?: number; after?: number; head?: number }> {
      const dir = copyOf(clean);
      dirs.push(dir);
      const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
      let clock = Date.parse('2026-01-01T00:00:00.000Z');
      const reading = new Proxy(store, {
        get(target, name) {
          if (name === 'readAll')
            return (options: Parameters<SqliteEventStore['readAll']>[0]) => {
              clock += readCostMs;
              return target.readAll(options);
            };
          const value = Reflect.get(target, name, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const file = join(dir, 'verified-checkpoint.json');
      let resting = false;
      try {
        const kept = new CheckpointKeeper({
          store: reading,
          file,
          checkEvent: ledgerEventProblem,
          now: () => new Date(clock),
          intervalMs: 60_000,
          // A paced check rests between pages; this one would rest for ever.
          pause: () => {
            resting = true;
            return new Promise<void>(() => undefined);
          },
          onFindings: () => undefined,
          onError: (error) => {
            throw error;
          },
        });
        await kept.afterAudit(await auditLog(store, { checkEvent: ledgerEventProblem }));
        const before = readVerifiedCheckpoint(file)?.position;
        const seeder = await openSeeder(dir, { start: '2025-03-02T09:00:00.000Z' });
        const plan = { run_id: 'run_91', tool: 'send_email', side_effect: 'write', input_hash: 'sha256:91' };
        await seeder.submit('run_91/step_1', 'StepPlanned', plan);
        await seeder.submit('run_91/step_1', 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:91' });
        await seeder.close();
        if (pausedCheck) {
          void kept.advance();
          await untilTrue('the paced check to rest after its first page', () => resting);
        }
        await kept.stop();
        return { before, after: readVerifiedCheckpoint(file)?.position, head: (await store.logAnchor())?.position };
      } finally {
        await store.close();
      }
    }

    it('moves up to the head at a clean stop', async () => {
      const { before, after, head } = await stoppedAfterGrowth(0);
      expect(head).toBeGreaterThan(before ?? 0);
      expect(after).toBe(head);
    });

    it('is moved at a stop that finds the periodic check resting between pages: the rest ends with the stop', async () => {
      const { before, after, head } = await stoppedAfterGrowth(0, true);
      expect(head).toBeGreaterThan(before ?? 0);
      expect(after).toBe(head);
    });

    it('is left where it was by a stop whose last check outlasts STOP_MOVE_MS, on the keeper clock: the next start reads the tail', async () => {
      const { before, after, head } = await stoppedAfterGrowth(STOP_MOVE_MS + 1);
      expect(head).toBeGreaterThan(before ?? 0);
      expect(after).toBe(before);
    });

    it('is not written after an audit whose position the store then fails to read, and the failure is reported, not thrown', async () => {
      const dir = copyOf(clean);
      dirs.push(dir);
      const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
      try {
        const audit = await auditLog(store, { checkEvent: ledgerEventProblem });
        const failing = new Proxy(store, {
          get(target, name) {
            if (name === 'readAll') return () => Promise.reject(new StoreUnavailableError('the store went away', 1));
            const value = Reflect.get(target, name, target);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
        const errors: Error[] = [];
        const kept = new CheckpointKeeper({
          store: failing,
          file: join(dir, 'verified-checkpoint.json'),
          checkEvent: ledgerEventProblem,
          now: () => new Date('2026-01-01T00:00:00.000Z'),
          intervalMs: 60_000,
          pause: () => Promise.resolve(),
          onFindings: () => undefined,
          onError: (error) => errors.push(error),
        });
        await expect(kept.afterAudit(audit)).resolves.toBeUndefined();
        expect(errors.map((error) => error.constructor.name)).toEqual(['StoreUnavailableError']);
        expect(existsSync(join(dir, 'verified-checkpoint.json'))).toBe(false);
      } finally {
        await store.close();
      }
    });

    it('refuses an edit of an event appended after it, naming its stream, before anything is served', async () => {
      const dir = await checkpointedThenGrown();
      const db = new Database(join(dir, 'events.sqlite'));
      db.prepare(
        "UPDATE events SET data = json_set(data, '$.attempt', 7) WHERE position = (SELECT MAX(position) FROM events)",
      ).run();
      db.close();
      const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
      try {
        const found: IntegrityFinding[] = [];
        const check = await keeper(store, dir, found).checkAtStart();
        expect(check.state).toBe('broken');
        expect(found.map((finding) => [finding.kind, finding.stream])).toContainEqual([
          'hash_mismatch',
          'op-default:run_90/step_1',
        ]);
      } finally {
        await store.close();
      }
    });

    it('leaves an edit before the checkpoint to the whole-log audit behind the service', async () => {
      const dir = await checkpointedThenGrown();
      const tamper = TAMPER_CASES.find((entry) => entry.name === 'an event edited in place');
      const db = new Database(join(dir, 'events.sqlite'));
      tamper?.apply(db);
      db.close();
      const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
      try {
        const check = await keeper(store, dir, []).checkAtStart();
        expect(check.state).toBe('verified');
        const audit = await auditLog(store, { checkEvent: ledgerEventProblem });
        expect(audit.findings.map((finding) => finding.kind)).toContain('hash_mismatch');
      } finally {
        await store.close();
      }
    });
  });
});
