/**
 * `npm run chaos`: the long campaign. Environment:
 *   CHAOS_SEED     replay a schedule (printed at the start of every run)
 *   CHAOS_SECONDS  bound on the load phase (default 240)
 *   CHAOS_CYCLES   kill/restart cycles (default 30, about 15% of them SIGTERM)
 *   CHAOS_CLIENTS  load-client processes (default 4), CHAOS_WORKERS operations at once in each (default 6)
 *   CHAOS_INSTANCES service processes sharing the one SQLite log (default 1; 2 runs them behind the
 *                  clients as behind a load balancer, each with its own read models)
 *   CHAOS_KEEP=1   keep the data directory (log, read model, client records, each service process's
 *                  output as service-<n>.log) for a post-mortem
 * Exits 1 when any check failed, 0 otherwise; the figures are printed either way.
 */
import { runCampaign, summarise } from './campaign';

function integer(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

async function main(): Promise<void> {
  const seed = process.env.CHAOS_SEED ? integer('CHAOS_SEED', 0) : undefined;
  const result = await runCampaign({
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
