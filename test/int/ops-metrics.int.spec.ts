/**
 * GET /metrics on the built service: request durations by route pattern and status, appends and
 * refusals by code, and the store's group-commit sizes, counted from what the test itself did.
 */
import { randomUUID } from 'node:crypto';
import { unknownOutcome } from '../support/cli-harness';
import { request, submitFact } from '../support/http';
import { until } from '../support/until';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const KEY = 'ops-metrics-runtime-key-1';
const auth = { authorization: `Bearer ${KEY}` };
const METRICS_KEY = 'ops-metrics-scraper-key-1';
const scraper = { authorization: `Bearer ${METRICS_KEY}` };
let ledger: LedgerProcess;

const submit = (ref: string, type: string, data: Record<string, unknown>) =>
  submitFact(ledger.baseUrl, ref, type, data, auth);

/** The value of one sample line, e.g. `ledger_refusals_total{code="VERIFY_BEFORE_RETRY"}`. */
function sample(exposition: string, name: string): number | undefined {
  const line = exposition.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

beforeAll(async () => {
  ledger = await startLedger({ env: { LEDGER_API_KEYS: `${KEY}:runtime:acme,${METRICS_KEY}:metrics:*` } });
});

afterAll(async () => {
  await ledger.stop();
  ledger.cleanup();
});

describe('GET /metrics', () => {
  it('counts appends and refusals by code, times requests by route, and measures group commits', async () => {
    const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
    expect(
      (
        await submit(ref, 'StepPlanned', {
          run_id: 'run_m',
          tool: 'create_invoice',
          side_effect: 'write',
          input_hash: 'h1',
        })
      ).status,
    ).toBe(200);
    expect((await submit(ref, 'AttemptDispatched', { attempt: 1, input_hash: 'h1' })).status).toBe(200);
    expect((await submit(ref, 'EnvelopeRecorded', { attempt: 1, envelope: unknownOutcome(ref) })).status).toBe(200);
    // Two dispatches the ledger refuses: verify before retry.
    for (let i = 0; i < 2; i++)
      expect((await submit(ref, 'AttemptDispatched', { attempt: 2, input_hash: 'h1' })).body.code).toBe(
        'VERIFY_BEFORE_RETRY',
      );
    // Ten plans at once: concurrent appends share commits.
    const plans = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        submit(`run_${randomUUID().slice(0, 8)}/step_${i}`, 'StepPlanned', {
          run_id: 'run_m',
          tool: 'send_email',
          side_effect: 'write',
          input_hash: 'h2',
        }),
      ),
    );
    expect(plans.every((answer) => answer.status === 200)).toBe(true);
    expect((await request(ledger.baseUrl, 'GET', '/v1/operations/nope%2Fnone', undefined, auth)).status).toBe(404);

    // The operator's scraper: a metrics key sees the whole process. Read once the read models show
    // every commit, so each has been timed.
    await until(
      async () => (await request(ledger.baseUrl, 'GET', '/metrics', undefined, scraper)).body as string,
      (text) =>
        sample(text, 'ledger_projection_readable_seconds_count') ===
        sample(text, 'ledger_store_group_commit_appends_count'),
      'every commit timed to readable',
    );
    const scrape = await request(ledger.baseUrl, 'GET', '/metrics', undefined, scraper);
    expect(scrape.status).toBe(200);
    expect(scrape.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = scrape.body as string;

    expect(sample(text, 'ledger_appends_total{tenant="acme"}')).toBe(13);
    // Each plan is two events (the fact and its transition), a dispatch and an envelope two each.
    expect(sample(text, 'ledger_events_appended_total{tenant="acme"}')).toBe(26);
    expect(sample(text, 'ledger_refusals_total{tenant="acme",code="VERIFY_BEFORE_RETRY"}')).toBe(2);
    // Every commit is observed; the two refusals were recorded too (DispatchRefused), so 15 appends.
    expect(sample(text, 'ledger_store_group_commit_appends_sum')).toBe(15);
    const commits = sample(text, 'ledger_store_group_commit_appends_count') ?? 0;
    expect(commits).toBeGreaterThan(0);
    expect(commits).toBeLessThanOrEqual(15);
    expect(sample(text, 'ledger_store_group_commit_events_sum')).toBe(28);
    // Every commit that became readable was timed, from its commit to the read models showing it.
    const readable = sample(text, 'ledger_projection_readable_seconds_count') ?? 0;
    expect(readable).toBe(commits);
    expect(sample(text, 'ledger_projection_readable_seconds_bucket{le="+Inf"}')).toBe(readable);
    expect(sample(text, 'ledger_projection_readable_seconds_sum')).toBeGreaterThan(0);

    const submits =
      'ledger_http_request_duration_seconds_count{tenant="acme",method="POST",route="/v1/operations/:ref/events",status_code="200"}';
    expect(sample(text, submits)).toBe(13);
    expect(
      sample(
        text,
        'ledger_http_request_duration_seconds_count{tenant="acme",method="POST",route="/v1/operations/:ref/events",status_code="409"}',
      ),
    ).toBe(2);
    expect(
      sample(
        text,
        'ledger_http_request_duration_seconds_count{tenant="acme",method="GET",route="/v1/operations/:ref",status_code="404"}',
      ),
    ).toBe(1);
    // The route pattern, never the raw path: operation refs do not become label values.
    expect(text).not.toContain(encodeURIComponent(ref));
    expect(text).toMatch(
      /^ledger_http_request_duration_seconds_bucket\{le="0\.005",tenant="acme",method="POST",route="\/v1\/operations\/:ref\/events",status_code="200"\} \d+$/m,
    );
  });

  it('needs a metrics or admin key', async () => {
    expect((await request(ledger.baseUrl, 'GET', '/metrics')).status).toBe(401);
    expect((await request(ledger.baseUrl, 'GET', '/metrics', undefined, auth)).status).toBe(403);
  });
});
