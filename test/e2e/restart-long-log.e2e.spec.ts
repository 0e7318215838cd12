/**
 * A restart does not re-read the log to come back (docs/reliability.md, "Start-up without a full
 * pass"): the built service, stopped cleanly on a generated log of 100,000 events (the bench's
 * generator, bench/support/large-log.ts) and started again, answers a read-model read, grants a
 * dispatch and hands out work having read from the store far fewer events than the log holds. A
 * full pass (the whole-log audit, or the read models rebuilt to compare them) reads every one of
 * them first; `ledger_store_events_read_total` counts every event the store decodes, so this is
 * proven by counting, never by timing.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeLargeLog } from '../../bench/support/large-log';
import { runCli } from '../support/cli-harness';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { until } from '../support/until';

const EVENTS = 100_000;

interface Ready {
  status: number;
  body: {
    details?: {
      integrity?: { state?: string; audit?: { state?: string } };
      projections?: { events_behind?: number | null };
    };
  };
}

async function ready(baseUrl: string): Promise<Ready> {
  const response = await fetch(`${baseUrl}/health/ready`);
  return { status: response.status, body: (await response.json()) as Ready['body'] };
}

async function eventsRead(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const found = /^ledger_store_events_read_total (\d+)/m.exec(text);
  if (!found) throw new Error('no ledger_store_events_read_total in /metrics');
  return Number(found[1]);
}

async function submit(baseUrl: string, ref: string, type: string, eventId: string, data: Record<string, unknown>) {
  const response = await fetch(`${baseUrl}/v1/operations/${encodeURIComponent(ref)}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ events: [{ event_id: eventId, type, data }] }),
  });
  return { status: response.status, body: (await response.json()) as { results?: Array<{ status: string }> } };
}

describe('a restart on a long log', () => {
  let ledger: LedgerProcess | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'ledger-e2e-long-'));

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('answers reads, dispatches and the work feed before a full pass could have read the log', async () => {
    const written = await writeLargeLog(join(dataDir, 'events.sqlite'), EVENTS);
    expect(written.events).toBe(EVENTS);

    // The first start anchors the log, audits it, builds the read models; stopped once all is done.
    ledger = await startLedger({ dataDir });
    const first = ledger;
    await until(
      () => ready(first.baseUrl),
      ({ status, body }) =>
        status === 200 &&
        body.details?.integrity?.state === 'verified' &&
        body.details.integrity.audit?.state !== 'running' &&
        body.details.projections?.events_behind === 0,
      'the first start to finish its checks and catch up',
      600_000,
    );
    await first.stop();

    ledger = await first.restart();
    const again = ledger;
    await until(
      async () => (await fetch(`${again.baseUrl}/v1/operations?limit=1`)).status,
      (status) => status === 200,
      'a read-model read after the restart',
      120_000,
    );
    const planned = await submit(again.baseUrl, 'restart/op_1', 'StepPlanned', '7b0e5f0a-8a43-4d4e-9c36-1d2a5f000001', {
      run_id: 'restart',
      tool: 'send_email',
      side_effect: 'write',
      input_hash: 'sha256:restart',
    });
    expect(planned.status).toBe(200);
    const work = await fetch(`${again.baseUrl}/v1/work?worker=w1&tool=send_email&limit=1&wait_ms=0`);
    expect(work.status).toBe(200);
    const dispatched = await submit(
      again.baseUrl,
      'restart/op_2',
      'StepPlanned',
      '7b0e5f0a-8a43-4d4e-9c36-1d2a5f000002',
      { run_id: 'restart', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:restart' },
    );
    expect(dispatched.status).toBe(200);
    const granted = await submit(
      again.baseUrl,
      'restart/op_2',
      'AttemptDispatched',
      '7b0e5f0a-8a43-4d4e-9c36-1d2a5f000003',
      { attempt: 1, input_hash: 'sha256:restart' },
    );
    expect(granted.status).toBe(200);
    expect(granted.body.results?.map((result) => result.status)).toEqual(['appended']);

    // Everything the store decoded since the process started: the check of what followed the
    // last checkpoint, the reads above, and whatever the paced whole-log audit has read behind.
    const read = await eventsRead(again.baseUrl);
    expect(read).toBeLessThan(EVENTS / 2);

    // Stopped cleanly, the checkpoint is at the head: `verify --tail` reads next to nothing.
    await again.stop();
    const tail = runCli(['verify', '--data-dir', dataDir, '--tail', '--json']);
    expect(tail.status).toBe(0);
    const report = JSON.parse(tail.stdout) as { ok: boolean; events_read: number };
    expect(report.ok).toBe(true);
    expect(report.events_read).toBeLessThan(100);
  }, 900_000);
});
