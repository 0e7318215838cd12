/**
 * Two built instances on one PostgreSQL (docs/postgres.md), as behind a load balancer: requests go
 * to each in turn, and one instance is killed (SIGKILL) in the middle of the load. A runtime whose
 * request found the instance gone sends the very same facts (same event ids) to the other one, as
 * it would after any lost answer (docs/contract.md §4). After it: every write acknowledged by
 * either instance is in the log, and no operation was dispatched twice.
 */
import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import { operationStream } from '../../src/store/stream-names';
import { fact, ledgerAt, type HttpAnswer } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { describeWithPostgres } from '../support/postgres';
import { envelopes, INPUT_1, ok } from '../support/scenario';

const TENANT = 'default'; // local mode
const OPERATIONS = 36;
const WORKERS = 6;

describeWithPostgres('two built instances on one PostgreSQL', (database) => {
  let instances: LedgerProcess[] = [];
  beforeAll(async () => {
    const env = { LEDGER_STORE: 'postgres', DATABASE_URL: database().url };
    instances = [await startLedger({ env }), await startLedger({ env })];
  });
  afterAll(async () => {
    for (const instance of instances) {
      await instance.stop();
      instance.cleanup();
    }
  });

  it('loses no acknowledged write and dispatches nothing twice when one instance is killed mid-load', async () => {
    const [doomed, survivor] = instances;
    const acknowledged: Array<{ ref: string; event_id: string }> = [];
    let turn = 0;
    let killed: Promise<void> | undefined;
    let acknowledgedAfterKill = 0;

    /** A load balancer's turn, and a runtime's retry of the same facts on a lost answer or a 503. */
    async function submit(ref: string, events: Array<{ event_id: string }>): Promise<HttpAnswer> {
      for (let attempt = 0; attempt < 40; attempt++) {
        const target = instances[turn++ % instances.length];
        const answer = await ledgerAt(target.baseUrl)
          .submit(ref, events)
          .catch(() => undefined);
        if (!answer || answer.status === 503) continue;
        if (answer.status === 200) {
          acknowledged.push(...events.map((event) => ({ ref, event_id: event.event_id })));
          if (killed) acknowledgedAfterKill++;
          // A third of the way through, the first instance dies without a word.
          if (!killed && acknowledged.length >= OPERATIONS) killed = doomed.kill();
        }
        return answer;
      }
      throw new Error(`no instance took ${ref}`);
    }

    const refs = Array.from({ length: OPERATIONS }, (_, index) => `run_${randomUUID().slice(0, 8)}/pg-load-${index}`);
    const queue = [...refs];
    const worker = async () => {
      for (let ref = queue.shift(); ref !== undefined; ref = queue.shift()) {
        const run_id = ref.split('/')[0];
        ok(
          await submit(ref, [
            fact('StepPlanned', { run_id, tool: 'create_invoice', side_effect: 'write', input_hash: INPUT_1 }),
          ]),
        );
        ok(await submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: INPUT_1 })]));
        ok(await submit(ref, [fact('EnvelopeRecorded', { attempt: 1, envelope: envelopes.success(ref) })]));
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, worker));
    await killed;
    expect(killed).toBeDefined();
    expect(doomed.child.signalCode).toBe('SIGKILL');
    expect(acknowledgedAfterKill).toBeGreaterThan(0);

    const log = new PostgresEventStore({ connectionString: database().url });
    try {
      const lost: string[] = [];
      const twice: string[] = [];
      for (const ref of refs) {
        const stream = await log.readStream(operationStream(TENANT, ref));
        const ids = new Set(stream.map((event) => event.event_id));
        for (const { event_id } of acknowledged.filter((entry) => entry.ref === ref)) {
          if (!ids.has(event_id)) lost.push(`${ref} ${event_id}`);
        }
        if (stream.filter((event) => event.type === 'AttemptDispatched').length !== 1) twice.push(ref);
      }
      expect({ lost, twice }).toEqual({ lost: [], twice: [] });
    } finally {
      await log.close();
    }
    // The survivor answers every operation as done.
    for (const ref of refs) {
      expect(ok(await ledgerAt(survivor.baseUrl).state(ref)).status).toBe('succeeded');
    }
  });
});
