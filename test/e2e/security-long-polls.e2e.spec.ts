/**
 * One tenant must not starve the others with long polls (docs/security.md, "Limits"), over real
 * HTTP against the built service: one runtime key holds its due steps under leases and opens many
 * `GET /v1/work?wait_ms=…` and `GET /v1/changes?wait_ms=…` polls at once. Beyond the caps per key
 * and per tenant they are refused 429 RATE_LIMITED with Retry-After; meanwhile another tenant's
 * submits all succeed and `/health/live` answers. Counts and waits are bounded; no speed is asserted.
 */
import { randomUUID } from 'node:crypto';
import { fact, opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { until } from '../support/until';

const ACME_KEY = `polls-acme-runtime-${randomUUID()}`;
const ACME_KEY_2 = `polls-acme-runtime2-${randomUUID()}`;
const GLOBEX_KEY = `polls-globex-runtime-${randomUUID()}`;
const PER_KEY = 6;
const PER_TENANT = 10;
const POLLS_PER_ROUTE = 40;
const SUBMITS = 40;
const TOOL = 'poll_tool';

const as = (key: string) => ({ authorization: `Bearer ${key}` });

interface Poll {
  done: Promise<{ status: number; retryAfter: string | null; code?: string } | 'aborted'>;
  settled?: { status: number; retryAfter: string | null; code?: string } | 'aborted';
}

describe('long polls are capped per key and per tenant', () => {
  let ledger: LedgerProcess;
  const abort = new AbortController();

  function open(path: string, key: string): Poll {
    const poll: Poll = {
      done: fetch(`${ledger.baseUrl}${path}`, { headers: as(key), signal: abort.signal })
        .then(async (response) => {
          const text = await response.text();
          const code = response.headers.get('content-type')?.startsWith('application/problem+json')
            ? (JSON.parse(text).code as string)
            : undefined;
          return { status: response.status, retryAfter: response.headers.get('retry-after'), code };
        })
        .catch(() => 'aborted' as const),
    };
    void poll.done.then((value) => (poll.settled = value));
    return poll;
  }

  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: `${ACME_KEY}:runtime:acme,${ACME_KEY_2}:runtime:acme,${GLOBEX_KEY}:runtime:globex`,
        LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
        LEDGER_LONG_POLLS_PER_KEY: String(PER_KEY),
        LEDGER_LONG_POLLS_PER_TENANT: String(PER_TENANT),
      },
    });
    // acme's due steps, all held by one of its workers: every poll finds only held items.
    for (let index = 0; index < 5; index++) {
      const planned = await request(
        ledger.baseUrl,
        'POST',
        `${opPath(`run_polls/step_${index}`)}/events`,
        {
          events: [
            fact('StepPlanned', {
              run_id: 'run_polls',
              tool: TOOL,
              side_effect: 'write',
              input_hash: `sha256:polls-${index}`,
            }),
          ],
        },
        as(ACME_KEY),
      );
      expect(planned.status).toBe(200);
    }
    // The feed may hand them out over several answers (each as the projection reaches it); a step
    // once leased to `holder` is not offered again, so the leased refs are gathered across answers.
    const leased = new Set<string>();
    await until(
      async () => {
        const answer = await request(
          ledger.baseUrl,
          'GET',
          `/v1/work?worker=holder&tool=${TOOL}&limit=10&wait_ms=1000&lease_ms=600000`,
          undefined,
          as(ACME_KEY),
        );
        expect(answer.status).toBe(200);
        for (const item of answer.body.items as Array<{ operation_ref: string }>) leased.add(item.operation_ref);
        return leased.size;
      },
      (count) => count === 5,
      'the five steps leased',
    );
  }, 60_000);

  afterAll(async () => {
    abort.abort();
    await ledger?.kill();
    ledger?.cleanup();
  });

  test('the excess polls get 429 with Retry-After; the other tenant and the probes keep being answered', async () => {
    const polls: Poll[] = [];
    for (let index = 0; index < POLLS_PER_ROUTE; index++) {
      polls.push(open(`/v1/work?worker=w${index}&tool=${TOOL}&wait_ms=30000`, ACME_KEY));
      polls.push(open(`/v1/changes?after=1000000000&wait_ms=30000`, ACME_KEY));
    }
    // The same tenant's second key gets what the tenant's cap leaves over the first key's share.
    const second = Array.from({ length: POLLS_PER_ROUTE }, (_, index) =>
      open(`/v1/work?worker=v${index}&tool=${TOOL}&wait_ms=30000`, ACME_KEY_2),
    );

    const refused = (list: Poll[]) =>
      list.filter((poll) => poll.settled !== undefined && poll.settled !== 'aborted' && poll.settled.status === 429);
    await until(
      async () => refused(polls).length,
      (count) => count === 2 * POLLS_PER_ROUTE - PER_KEY,
      'the first key refused beyond its cap',
      30_000,
    );
    await until(
      async () => refused(second).length,
      (count) => count === POLLS_PER_ROUTE - (PER_TENANT - PER_KEY),
      "the tenant's cap refusing the second key",
      30_000,
    );
    for (const poll of [...refused(polls), ...refused(second)]) {
      const answer = poll.settled as { status: number; retryAfter: string | null; code?: string };
      expect(answer.code).toBe('RATE_LIMITED');
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    // The admitted ones are still waiting.
    expect([...polls, ...second].filter((poll) => poll.settled === undefined)).toHaveLength(PER_TENANT);

    // While they wait: every one of globex's submits is stored, and the liveness probe answers.
    const results: number[] = [];
    for (let batch = 0; batch < SUBMITS; batch += 8) {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, offset) =>
          request(
            ledger.baseUrl,
            'POST',
            `${opPath(`run_globex/step_${batch + offset}`)}/events`,
            {
              events: [
                fact('StepPlanned', {
                  run_id: 'run_globex',
                  tool: 'globex_tool',
                  side_effect: 'write',
                  input_hash: `sha256:g-${batch + offset}`,
                }),
              ],
            },
            as(GLOBEX_KEY),
          ),
        ),
      );
      results.push(...answers.map((answer) => answer.status));
      expect((await request(ledger.baseUrl, 'GET', '/health/live')).status).toBe(200);
    }
    expect(results).toEqual(Array.from({ length: SUBMITS }, () => 200));
    // Another tenant has caps of its own: its long polls are not refused.
    const globexPoll = await request(ledger.baseUrl, 'GET', '/v1/work?wait_ms=200', undefined, as(GLOBEX_KEY));
    expect(globexPoll.status).toBe(200);
  }, 90_000);

  test('a slot is free again once its poll has ended', async () => {
    // The second key's admitted polls end when their sockets close; its next poll is let in.
    abort.abort();
    const again = await until(
      () => request(ledger.baseUrl, 'GET', `/v1/work?worker=again&tool=${TOOL}&wait_ms=100`, undefined, as(ACME_KEY_2)),
      (answer) => answer.status === 200,
      'a poll of the second key let in again',
    );
    expect(again.body).toEqual({ items: [] });
  }, 30_000);
});
