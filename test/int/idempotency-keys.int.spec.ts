/**
 * The Idempotency-Key keeper on a real SQLite file: a request still being processed under a key
 * refuses a second one with 409 IDEMPOTENCY_KEY_IN_FLIGHT (the draft's concurrent case, held open
 * here by the test instead of a slow store); a refused first request keeps nothing, so its retry
 * runs; a kept answer survives a restart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerProblem } from '@recovery-ledger/core/errors/ledger-problem';
import { IdempotencyKeys } from '../../src/http/idempotency-keys';

const caller = { tenant: 'acme', actor: 'key_1', role: 'runtime' as const };
const request = { method: 'POST', route: '/v1/operations/r/events', body: { events: [{ event_id: 'e1' }] } };

describe('Idempotency-Key keeper', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'idempotency-keys-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const keeper = () => new IdempotencyKeys(dir);

  it('answers 409 IDEMPOTENCY_KEY_IN_FLIGHT while the first request with the key is processed, then replays its answer', async () => {
    const keys = keeper();
    let finish: (value: unknown) => void = () => undefined;
    const first = keys.run(caller, 'k1', request, () => new Promise((resolve) => (finish = resolve)));
    await expect(keys.run(caller, 'k1', request, async () => 'second')).rejects.toMatchObject({
      code: 'IDEMPOTENCY_KEY_IN_FLIGHT',
    });
    finish({ revision: 1 });
    await expect(first).resolves.toEqual({ answer: { revision: 1 }, replayed: false });
    await expect(keys.run(caller, 'k1', request, async () => 'again')).resolves.toEqual({
      answer: { revision: 1 },
      replayed: true,
    });
    keys.onApplicationShutdown();
    // Kept on disk: a restarted service replays it too, and still refuses another body.
    const restarted = keeper();
    await expect(restarted.run(caller, 'k1', request, async () => 'after restart')).resolves.toEqual({
      answer: { revision: 1 },
      replayed: true,
    });
    await expect(
      restarted.run(caller, 'k1', { ...request, body: { events: [] } }, async () => 'other'),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    restarted.onApplicationShutdown();
  });

  it('keeps nothing for a refused request: a retry with the key is decided again', async () => {
    const keys = keeper();
    await expect(
      keys.run(caller, 'k2', request, async () => Promise.reject(new LedgerProblem('STEP_NOT_PLANNED', 'no plan'))),
    ).rejects.toMatchObject({ code: 'STEP_NOT_PLANNED' });
    await expect(
      keys.run(caller, 'k2', { ...request, body: { events: [{ event_id: 'e2' }] } }, async () => 'corrected'),
    ).resolves.toEqual({ answer: 'corrected', replayed: false });
    keys.onApplicationShutdown();
  });
});
