/**
 * The CI variant of the fault campaign (`npm run chaos` is the long one): three load-client
 * processes drive operations through the SDK while the built service is SIGKILLed three times and
 * restarted on the same data directory; then every acknowledgement is held against the log on disk
 * (test/chaos/checker.ts). CHAOS_SEED replays a schedule; the seed is in every failure message.
 */
import { runCampaign, summarise, type CampaignResult } from '../chaos/campaign';
import { newSeed } from '../chaos/prng';

const SEED = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : newSeed();

describe('fault campaign, short: acknowledged means durable across SIGKILLs', () => {
  let result: CampaignResult;

  beforeAll(async () => {
    result = await runCampaign({
      seed: SEED,
      cycles: 3,
      seconds: 40,
      clients: 3,
      workersPerClient: 4,
      gracefulShare: 0,
    });
  }, 120_000);

  test('ran three SIGKILL cycles under load, with resends of the same ids across them', () => {
    const resends = result.clients.reduce((sum, client) => sum + client.resends, 0);
    const killed = result.cycles.filter((cycle) => cycle.kind !== 'sigterm').length;
    expect({ seed: SEED, killed, clients: result.clients.length }).toEqual({ seed: SEED, killed: 3, clients: 3 });
    // Every kill lands on requests in flight: the clients had to send some event ids again.
    expect({ seed: SEED, resendsHappened: resends > 0, acknowledged: result.figures.facts_acknowledged > 50 }).toEqual({
      seed: SEED,
      resendsHappened: true,
      acknowledged: true,
    });
  });

  test('nothing acknowledged was lost, nothing was stored twice, nothing disagrees', () => {
    const { lost, duplicated, mismatches } = result.figures;
    expect({ seed: SEED, lost, duplicated, mismatches, anomalies: result.anomalies }).toEqual({
      seed: SEED,
      lost: 0,
      duplicated: 0,
      mismatches: 0,
      anomalies: [],
    });
  });

  test("no request was answered 5xx but the store's 503, and the service logged no unexpected error", () => {
    const serverErrors = result.anomalies.filter((anomaly) => anomaly.what === 'server_error');
    expect({ seed: SEED, serverErrors, logged: result.serverErrors }).toEqual({
      seed: SEED,
      serverErrors: [],
      logged: [],
    });
  });

  test('every check ran on something, or says why it could not', () => {
    for (const [name, outcome] of Object.entries(result.report)) {
      if (outcome.notRun !== undefined) continue;
      expect({ seed: SEED, check: name, ran: outcome.checked > 0, failures: outcome.failures }).toEqual({
        seed: SEED,
        check: name,
        ran: true,
        failures: [],
      });
    }
    // These need no projection engine in the service, so they always run.
    for (const name of [
      'acknowledged_in_log',
      'hash_chain',
      'served_state_equals_fold',
      'trust_read_model_equals_count',
    ] as const) {
      expect({ check: name, notRun: result.report[name].notRun }).toEqual({ check: name, notRun: undefined });
    }
  });

  afterAll(() => {
    if (result) process.stdout.write(`${summarise(result)}\n`);
  });
});
