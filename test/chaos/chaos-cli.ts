/**
 * `npm run chaos`: the long campaign. Environment:
 *   CHAOS_SEED     replay a schedule (printed at the start of every run)
 *   CHAOS_SECONDS  bound on the load phase (default 240)
 *   CHAOS_CYCLES   kill/restart cycles (default 30, about 15% of them SIGTERM)
 *   CHAOS_CLIENTS  load-client processes (default 4), CHAOS_WORKERS operations at once in each (default 6)
 *   CHAOS_INSTANCES service processes sharing the one log (default 1; 2 runs them behind the
 *                  clients as behind a load balancer, each with its own data directory)
 *   CHAOS_STORE    sqlite (default) or postgres: every instance on one fresh database, made on the
 *                  server at DATABASE_URL or, without it, on a throwaway cluster started from the
 *                  installed PostgreSQL binaries (test/support/postgres.ts); dropped after the run
 *   CHAOS_DB_CRASHES cycles that crash the PostgreSQL server itself instead of an instance (default
 *                  0; only on the throwaway cluster, which the campaign can stop and start)
 *   CHAOS_KEEP=1   keep the data directory (log, read model, client records, each service process's
 *                  output as service-<n>.log) for a post-mortem
 * Exits 1 when any check failed, 0 otherwise; the figures are printed either way.
 */
import { runCampaign, summarise, type CampaignOptions } from './campaign';
import { postgresAvailable, POSTGRES_SKIP_LINE, startTestDatabase, type TestDatabase } from '../support/postgres';

function integer(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

/** The database of a PostgreSQL run, with what the campaign needs of it. */
async function postgresFor(): Promise<{ database: TestDatabase; options: CampaignOptions['postgres'] }> {
  if (!postgresAvailable())
    throw new Error(POSTGRES_SKIP_LINE.replace('postgres tier skipped', 'CHAOS_STORE=postgres'));
  const databaseCrashes = integer('CHAOS_DB_CRASHES', 0);
  const database = await startTestDatabase();
  if (databaseCrashes > 0 && !database.crash) {
    await database.stop();
    throw new Error('CHAOS_DB_CRASHES needs the throwaway cluster: unset DATABASE_URL');
  }
  return { database, options: { url: database.url, crash: database.crash, databaseCrashes } };
}

async function main(): Promise<void> {
  const seed = process.env.CHAOS_SEED ? integer('CHAOS_SEED', 0) : undefined;
  const store = process.env.CHAOS_STORE || 'sqlite';
  if (store !== 'sqlite' && store !== 'postgres')
    throw new Error(`CHAOS_STORE must be sqlite or postgres, got "${store}"`);
  const postgres = store === 'postgres' ? await postgresFor() : undefined;
  try {
    await campaign(seed, postgres?.options);
  } finally {
    await postgres?.database.stop();
  }
}

async function campaign(seed: number | undefined, postgres: CampaignOptions['postgres']): Promise<void> {
  const result = await runCampaign({
    postgres,
    seed,
    seconds: integer('CHAOS_SECONDS', 240),
    cycles: integer('CHAOS_CYCLES', 30),
    clients: integer('CHAOS_CLIENTS', 4),
    workersPerClient: integer('CHAOS_WORKERS', 6),
    instances: integer('CHAOS_INSTANCES', 1),
    dataDir: process.env.CHAOS_DATA_DIR || undefined,
    keepData: process.env.CHAOS_KEEP === '1',
    log: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`\n${summarise(result)}\n`);
  if (process.env.CHAOS_KEEP === '1') process.stdout.write(`data kept in ${result.dataDir}\n`);
  const failed = Object.values(result.report).some((outcome) => outcome.failures.length > 0);
  process.stdout.write(
    `\n${JSON.stringify({ seed: result.seed, cycles: result.cycles.length, ...result.figures, anomalies: result.anomalies.length })}\n`,
  );
  process.exitCode = failed || result.anomalies.length > 0 || result.serverErrors.length > 0 ? 1 : 0;
}

main().catch((error: unknown) => {
  process.stderr.write(`chaos campaign failed: ${String((error as Error)?.stack ?? error)}\n`);
  process.exitCode = 1;
});
