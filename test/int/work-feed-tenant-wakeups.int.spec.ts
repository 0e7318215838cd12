/**
 * One tenant's open work polls cost nothing on another tenant's submits (docs/work-feed.md, "Long
 * polls"): the whole service in process, over real HTTP. acme holds 64 long polls open, one per
 * tool, so no two share a look; globex then submits. Each look of a poll is one query of the
 * step-state read model (`dueSteps`), counted per tenant on the real read model: the count of
 * acme's looks while globex's commits reach the read model is the measure, not a rate. The polls'
 * own clock is set far off (LEDGER_WORK_POLL_MS), so every look counted was woken by a commit.
 */
import { randomUUID } from 'node:crypto';
import { READ_MODEL } from '../../src/projection-engine/projections.module';
import type { ReadModel } from '../../src/store/read-model.port';
import { fact, opPath, request } from '../support/http';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { untilTrue } from '../support/until';

const ACME_KEY = `wakeups-acme-${randomUUID()}`;
const GLOBEX_KEY = `wakeups-globex-${randomUUID()}`;
const POLLS = 64;
const SUBMITS = 20;
const as = (key: string) => ({ authorization: `Bearer ${key}` });

describe("one tenant's waiting polls and another tenant's submits", () => {
  let ledger: InProcessLedger;
  let looks: Map<string, number>;
  const abort = new AbortController();

  beforeAll(async () => {
    ledger = await startLedgerInProcess({
      env: {
        LEDGER_API_KEYS: `${ACME_KEY}:runtime:acme,${GLOBEX_KEY}:runtime:globex`,
        LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
        LEDGER_LONG_POLLS_PER_KEY: String(POLLS),
        LEDGER_WORK_POLL_MS: '60000',
      },
    });
    const readModel = ledger.app.get<ReadModel>(READ_MODEL);
    looks = new Map();
    const dueSteps = readModel.dueSteps.bind(readModel);
    jest.spyOn(readModel, 'dueSteps').mockImplementation((query) => {
      looks.set(query.tenant, (looks.get(query.tenant) ?? 0) + 1);
      return dueSteps(query);
    });
  });

  afterAll(async () => {
    abort.abort();
    await ledger.stop();
    ledger.cleanup();
  });

  const plan = (key: string, ref: string, tool: string) =>
    request(
      ledger.baseUrl,
      'POST',
      `${opPath(ref)}/events`,
      {
        events: [fact('StepPlanned', { run_id: 'run_wake', tool, side_effect: 'write', input_hash: `sha256:${ref}` })],
      },
      as(key),
    );

  it("does not wake acme's polls on globex's commits, and still wakes them on acme's own", async () => {
    const polls = Array.from({ length: POLLS }, (_, index) =>
      fetch(`${ledger.baseUrl}/v1/work?tool=tool_${index}&wait_ms=30000&worker=w${index}`, {
        headers: as(ACME_KEY),
        signal: abort.signal,
      })
        .then(async (response) => ({ status: response.status, body: (await response.json()) as { items: unknown[] } }))
        .catch(() => 'aborted' as const),
    );
    // Each poll looks once when it arrives; then all 64 wait.
    await untilTrue('every acme poll looked once', () => (looks.get('acme') ?? 0) >= POLLS);
    const before = looks.get('acme') ?? 0;

    let last = 0;
    for (let index = 0; index < SUBMITS; index++) {
      const answer = await plan(GLOBEX_KEY, `run_wake/globex_${index}`, 'tool_0');
      expect(answer.status).toBe(200);
      last = answer.body.position;
    }
    // Every globex commit has reached the read model the polls watch.
    const caughtUp = await request(
      ledger.baseUrl,
      'GET',
      `/v1/operations?wait_for_position=${last}&limit=1`,
      undefined,
      as(GLOBEX_KEY),
    );
    expect(caughtUp.status).toBe(200);
    const woken = (looks.get('acme') ?? 0) - before;
    console.info(`acme looks during ${SUBMITS} globex submits with ${POLLS} acme polls open: ${woken}`);
    expect(woken).toBe(0);

    // acme's own step wakes its poll for that tool, and only that one answers.
    const planned = await plan(ACME_KEY, 'run_wake/acme_0', 'tool_0');
    expect(planned.status).toBe(200);
    const first = await polls[0];
    expect(first).not.toBe('aborted');
    if (first !== 'aborted') expect(first.body.items).toHaveLength(1);
  });
});
