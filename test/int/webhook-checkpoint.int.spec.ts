/**
 * The webhook consumer's checkpoint (docs/webhooks.md): a consumed batch that changes no row does not
 * commit (each commit of the webhook file is a disk sync on the service's thread), and what that
 * defers can never be consumed again to a different effect: the position is made durable within a
 * second, at stop, and before a premature refusal is counted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../src/shared/clock';
import type { StoredEvent } from '../../src/store/event-store.port';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { operationStream } from '../../src/store/stream-names';
import { SqliteWebhookStore } from '../../src/adapters/sqlite/sqlite-webhook.store';
import { WebhookService } from '../../src/webhooks/webhook.service';

const TENANT = 'acme';
const REF = 'run_1/step_1';

/** A transition as the log holds it: what the consumer reacts to (a reset of premature counts, at least). */
function transition(position: number, to: string): StoredEvent {
  return {
    stream: operationStream(TENANT, REF),
    revision: position - 1,
    position,
    event_id: `00000000-0000-4000-8000-${String(position).padStart(12, '0')}`,
    type: 'TransitionRecorded',
    data: { from: 'planned', to, reason: 'test' },
    metadata: {
      schema_version: 1,
      recorded_at: new Date().toISOString(),
      actor: 'local',
      tenant: TENANT,
      operation_ref: REF,
      prev_hash: '0'.repeat(64),
      hash: '0'.repeat(64),
    },
  } as StoredEvent;
}

describe('the webhook consumer checkpoint', () => {
  let dir: string;
  let log: SqliteEventStore;
  const opened: SqliteWebhookStore[] = [];
  const openHooks = () => {
    const hooks = new SqliteWebhookStore(join(dir, 'webhooks.sqlite'));
    opened.push(hooks);
    return hooks;
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-webhook-checkpoint-'));
    log = SqliteEventStore.open({ file: ':memory:' });
  });

  afterEach(async () => {
    for (const hooks of opened.splice(0)) await hooks.close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a batch that changes no row leaves the checkpoint unwritten until stop, which writes it', async () => {
    const hooks = openHooks();
    const service = new WebhookService(log, hooks, systemClock);
    await service.consume([transition(1, 'dispatching'), transition(2, 'verifying')]);
    expect(await hooks.checkpoint()).toBe(0);
    await service.stop();
    expect(await hooks.checkpoint()).toBe(2);
  });

  it('writes the deferred checkpoint within about a second without a stop', async () => {
    const hooks = openHooks();
    const service = new WebhookService(log, hooks, systemClock);
    await service.consume([transition(1, 'dispatching')]);
    const deadline = Date.now() + 5000;
    while ((await hooks.checkpoint()) === 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await hooks.checkpoint()).toBe(1);
  });

  it('a premature count taken after a consumed transition is not reset by consuming it again after a crash', async () => {
    const hooks = openHooks();
    const service = new WebhookService(log, hooks, systemClock);
    await service.subscribe(TENANT, {
      url: 'https://hooks.example.com/ledger',
      kinds: ['verification.premature_repeated'],
      premature_refusals: 2,
    });
    await service.consume([transition(1, 'verifying')]);
    await service.onRefused('VERIFICATION_PREMATURE', TENANT, REF);

    // A crash: the next process follows the log from the durable checkpoint and counts on.
    const restarted = new WebhookService(log, openHooks(), systemClock);
    const reopened = opened[opened.length - 1];
    const durable = await reopened.checkpoint();
    await restarted.consume([transition(1, 'verifying')].filter((event) => event.position > durable));
    await restarted.onRefused('VERIFICATION_PREMATURE', TENANT, REF);
    expect((await reopened.deliveries(TENANT, { limit: 10 })).map((delivery) => delivery.kind)).toEqual([
      'verification.premature_repeated',
    ]);
  });
});
