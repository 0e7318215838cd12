/**
 * The service started on a damaged log (docs/reliability.md, "A log whose every loss is
 * detectable"): every way of damaging the log this suite knows (test/support/log-tampering.ts),
 * each on its own copy of a real events file, then the real application started on it in this
 * process. It reports the damage on readiness, answers reads of the damaged operation with
 * HISTORY_INTEGRITY_FAILED, and refuses to append on top of it. `recovery-ledger verify` on the
 * same damage, and the rolled-back logs, are test/e2e/integrity.e2e.spec.ts's.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startLedger } from '../support/ledger-in-process';
import { seededLogsForFile, tamperedCopy, TAMPER_CASES, type TamperCase } from '../support/log-tampering';

const ANCHOR_KEY = 'k'.repeat(16) + randomUUID().replace(/-/g, '');
const seeded = seededLogsForFile(ANCHOR_KEY);

const eventCount = (dir: string) => {
  const db = new Database(join(dir, 'events.sqlite'), { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
  } finally {
    db.close();
  }
};

describe('the service started on a damaged log', () => {
  it.each(TAMPER_CASES.map((tamper) => [tamper.name, tamper] as const))(
    'after %s: not ready, and refuses to read or append the damaged history',
    async (_name, tamper: TamperCase) => {
      const env: Record<string, string> = tamper.needsAnchorKey ? { LEDGER_ANCHOR_KEY: ANCHOR_KEY } : {};
      const dir = tamperedCopy(tamper.needsAnchorKey ? seeded.keyed() : seeded.plain(), tamper.apply);
      const ledger = await startLedger({ dataDir: dir, env });
      try {
        let ready: Response | undefined;
        for (let polls = 0; polls < 200; polls++) {
          ready = await fetch(`${ledger.baseUrl}/health/ready`);
          const body = (await ready.clone().json()) as { details?: { integrity?: { state?: string } } };
          if (['broken', 'unverifiable'].includes(body.details?.integrity?.state ?? '')) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        expect(ready?.status).toBe(503);
        expect(((await ready?.json()) as { details: { integrity: { state: string } } }).details.integrity.state).toBe(
          'broken',
        );

        const path = `${ledger.baseUrl}/v1/operations/${encodeURIComponent(tamper.ref)}`;
        const read = await fetch(path);
        expect(read.status).toBe(500);
        expect(((await read.json()) as { code: string }).code).toBe('HISTORY_INTEGRITY_FAILED');

        const before = eventCount(dir);
        const submit = await fetch(`${path}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            events: [
              { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 3, input_hash: 'sha256:9c1f' } },
            ],
          }),
        });
        const problem = (await submit.json()) as { code: string; detail: string };
        expect(submit.status).toBe(500);
        expect(problem.code).toBe('HISTORY_INTEGRITY_FAILED');
        expect(problem.detail).not.toMatch(/\n\s+at /);
        expect(eventCount(dir)).toBe(before);
      } finally {
        await ledger.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
