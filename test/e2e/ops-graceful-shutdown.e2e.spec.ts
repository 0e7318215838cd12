/**
 * SIGTERM while runtimes are submitting: the service stops taking new requests, finishes the
 * appends it has accepted, lets the projection engine end its batch, and exits. Every write it
 * acknowledged (a 200) is in the log afterwards, and the projections, once restarted, count each
 * operation exactly once.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/core/projections/projection-catalog';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { runCli } from '../support/cli-harness';
import { fact, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

/** The service's read model file (READ_MODEL_FILE of src/projection-engine/projections.module.ts, whose NestJS imports jest cannot load). */
const READ_MODEL_FILE = 'read-models.sqlite';

const WORKERS = 24;
const ACKS_BEFORE_SIGTERM = 300;

interface Ack {
  ref: string;
  event_id: string;
}

let ledger: LedgerProcess;

afterAll(() => ledger?.cleanup());

function storedLog(dataDir: string): { ids: Set<string>; head: number } {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const rows = db.prepare('SELECT event_id, position FROM events').all() as Array<{
      event_id: string;
      position: number;
    }>;
    return { ids: new Set(rows.map((row) => row.event_id)), head: Math.max(0, ...rows.map((row) => row.position)) };
  } finally {
    db.close();
  }
}

describe('graceful shutdown', () => {
  it('loses no acknowledged write when SIGTERM arrives during load', async () => {
    ledger = await startLedger();
    const acks: Ack[] = [];
    const outcomes = { acknowledged: 0, refusedWhileClosing: 0, connectionErrors: 0 };
    let stop = false;
    let signalled: () => void = () => undefined;
    const enoughLoad = new Promise<void>((resolve) => (signalled = resolve));

    const worker = async () => {
      while (!stop) {
        const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
        const event = fact('StepPlanned', {
          run_id: 'run_sigterm',
          tool: 'create_invoice',
          side_effect: 'write',
          input_hash: 'h1',
        });
        try {
          const answer = await request(ledger.baseUrl, 'POST', `/v1/operations/${encodeURIComponent(ref)}/events`, {
            events: [event],
          });
          if (answer.status === 200) {
            acks.push({ ref, event_id: event.event_id });
            outcomes.acknowledged += 1;
            if (acks.length >= ACKS_BEFORE_SIGTERM) signalled();
          } else if (answer.status === 503) {
            outcomes.refusedWhileClosing += 1;
          } else {
            throw new Error(`unexpected ${answer.status} ${JSON.stringify(answer.body)}`);
          }
        } catch (error) {
          if ((error as Error).message.startsWith('unexpected')) throw error;
          // The listener is gone: this request was never acknowledged, so nothing is owed for it.
          outcomes.connectionErrors += 1;
          if (ledger.child.exitCode !== null || ledger.child.signalCode !== null) return;
        }
      }
    };

    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      ledger.child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const load = Promise.all(Array.from({ length: WORKERS }, worker));
    await enoughLoad;
    ledger.child.kill('SIGTERM');
    const exit = await exited;
    stop = true;
    await load;

    // It ended because it was asked to: by re-raising SIGTERM after the shutdown hooks, or exit 0.
    expect(exit.signal === 'SIGTERM' || exit.code === 0).toBe(true);
    expect(ledger.output()).not.toMatch(/ERROR_DURING_SHUTDOWN|Error during shutdown/i);
    expect(outcomes.acknowledged).toBeGreaterThanOrEqual(ACKS_BEFORE_SIGTERM);

    const { ids: stored, head } = storedLog(ledger.dataDir);
    const lost = acks.filter((ack) => !stored.has(ack.event_id));
    expect(lost).toEqual([]);

    // Whatever the shutdown cut, what is stored is whole: every hash chain holds.
    const verify = runCli(['verify', '--data-dir', ledger.dataDir]);
    expect(verify.stdout).toMatch(/every hash chain holds/);
    expect(verify.status).toBe(0);

    // The read model was left at a batch boundary: after a restart the engine resumes from its
    // checkpoints and counts every stored operation once, none twice.
    const restarted = await ledger.restart();
    try {
      const trust = await request(
        restarted.baseUrl,
        'GET',
        `/v1/metrics/trust?wait_for_position=${head}&wait_timeout_ms=20000`,
      );
      expect(trust.status).toBe(200);
      // Two events per plan: the fact and its transition.
      expect(trust.body.overall.operations_planned).toBe(stored.size / 2);
    } finally {
      await restarted.stop();
    }
    const readModel = SqliteReadModel.open({ file: join(ledger.dataDir, READ_MODEL_FILE) });
    try {
      for (const projection of LEDGER_PROJECTIONS) readModel.register(projection);
      const steps = readModel.dump('step_state').docs.length;
      expect(steps).toBe(stored.size / 2);
    } finally {
      readModel.close();
    }
  });
});
