import { randomUUID } from 'node:crypto';
import { LedgerClient } from '../src/client';
import { startLedger } from '../test/support/ledger-process';
import { runWorker, startProviderProcess, waitForStatus, INVOICE, CREATE_INVOICE } from '../test/support/work-feed-harness';
async function main() {
  const [ledger, provider] = await Promise.all([startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' } }), startProviderProcess(['--no-idempotency'])]);
  const client = new LedgerClient({ baseUrl: ledger.baseUrl });
  const t0 = Date.now();
  const w = runWorker(client, provider.url, { id: 'w', toolTimeoutMs: 500 });
  const orig = w.events.push.bind(w.events);
  w.events.push = (...e: any[]) => { for (const x of e) console.log(Date.now() - t0, JSON.stringify(x)); return orig(...e); };
  const ref = `r/${randomUUID().slice(0, 6)}`;
  await provider.inject({ operation_ref: ref, fault: { kind: 'accept-then-timeout' } });
  await client.startStep({ operationRef: ref, runId: 'r', tool: CREATE_INVOICE, input: INVOICE, policy: { consistency_window_ms: 0 } });
  console.log(Date.now() - t0, 'started');
  await waitForStatus(client, ref, ['succeeded']);
  console.log(Date.now() - t0, 'succeeded');
  const refs = Array.from({ length: 40 }, (_, i) => `p/${i}-${randomUUID().slice(0, 6)}`);
  const t1 = Date.now();
  await Promise.all(refs.map((r) => client.startStep({ operationRef: r, runId: 'r', tool: CREATE_INVOICE, input: INVOICE })));
  console.log(Date.now() - t1, 'planned 40');
  for (const r of refs) await waitForStatus(client, r, ['succeeded']);
  console.log(Date.now() - t1, 'done 40');
  await w.stop(); await ledger.stop(); await provider.stop(); ledger.cleanup();
}
main();
