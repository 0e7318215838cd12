/**
 * The one contract every Idempotency-Key store passes (src/store/idempotency-key-store.port.ts),
 * through the keeper the HTTP edge uses: a request still being processed under a key refuses a
 * second one with 409 IDEMPOTENCY_KEY_IN_FLIGHT (the draft's concurrent case, held open here by the
 * test instead of a slow store); a refused first request keeps nothing, so its retry runs; a kept
 * answer survives a restart, or is read by another instance on a shared store.
 */
import { LedgerProblem } from '@recovery-ledger/core';
import { IdempotencyKeys } from '../../src/http/idempotency-keys';

export interface IdempotencyKeysUnderTest {
  /** A keeper over the store; a second call is a restarted instance, or another one on a shared store. */
  open(): IdempotencyKeys;
  cleanup(): Promise<void>;
}

const caller = { tenant: 'acme', actor: 'key_1', role: 'runtime' as const };
const request = { method: 'POST', route: '/v1/operations/r/events', body: { events: [{ event_id: 'e1' }] } };

export function testIdempotencyKeys(name: string, factory: () => Promise<IdempotencyKeysUnderTest>): void {
  describe(`Idempotency-Key keeper: ${name}`, () => {
    let subject: IdempotencyKeysUnderTest;
    const opened: IdempotencyKeys[] = [];
    const keeper = () => {
      const keys = subject.open();
      opened.push(keys);
      return keys;
    };
    beforeEach(async () => {
      subject = await factory();
    });
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((keys) => keys.onApplicationShutdown()));
      await subject.cleanup();
    });

    it('answers 409 IDEMPOTENCY_KEY_IN_FLIGHT while the first request with the key is processed, then replays its answer', async () => {
      const keys = keeper();
      let finish: (value: unknown) => void = () => undefined;
      let started: () => void = () => undefined;
      const running = new Promise<void>((resolve) => (started = resolve));
      const first = keys.run(caller, 'k1', request, () => {
        started();
        return new Promise((resolve) => (finish = resolve));
      });
      await expect(keys.run(caller, 'k1', request, async () => 'second')).rejects.toMatchObject({
        code: 'IDEMPOTENCY_KEY_IN_FLIGHT',
      });
      await running;
      finish({ revision: 1 });
      await expect(first).resolves.toEqual({ answer: { revision: 1 }, replayed: false });
      await expect(keys.run(caller, 'k1', request, async () => 'again')).resolves.toEqual({
        answer: { revision: 1 },
        replayed: true,
      });
      await keys.onApplicationShutdown();
      // Kept in the store: a restarted service replays it too, and still refuses another body.
      const restarted = keeper();
      await expect(restarted.run(caller, 'k1', request, async () => 'after restart')).resolves.toEqual({
        answer: { revision: 1 },
        replayed: true,
      });
      await expect(
        restarted.run(caller, 'k1', { ...request, body: { events: [] } }, async () => 'other'),
      ).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    });

    it('keeps nothing for a refused request: a retry with the key is decided again', async () => {
      const keys = keeper();
      await expect(
        keys.run(caller, 'k2', request, async () => Promise.reject(new LedgerProblem('STEP_NOT_PLANNED', 'no plan'))),
      ).rejects.toMatchObject({ code: 'STEP_NOT_PLANNED' });
      await expect(
        keys.run(caller, 'k2', { ...request, body: { events: [{ event_id: 'e2' }] } }, async () => 'corrected'),
      ).resolves.toEqual({ answer: 'corrected', replayed: false });
    });
  });
}
