/**
 * Two built instances on one PostgreSQL (docs/postgres.md, "Read models"): the CPU each instance
 * and the database spend on a load of tool steps sent to both in turn, and how long a read on one
 * instance waits for a write the other acknowledged (`wait_for_position`, docs/contract.md §5).
 *
 *   npm run build && DATABASE_URL=postgres://user@host:port/postgres \
 *     node dist/bench/postgres-read-models.bench.js [operations=1500] [main.js of another build]
 *   ... node dist/bench/postgres-read-models.bench.js takeover [rounds=5]
 *
 * `takeover` kills the projecting instance (SIGKILL) and times how long until the other one's
 * /health/ready says it projects, polled every 20 ms.
 *
 * Each run makes a database of its own on that server and drops it after. With a second build's
 * main.js, both instances run that build instead (to compare with a build whose instances each
 * project the whole log). CPU is read from /proc before and after the load: the two instances by
 * pid, the database as its postmaster (BENCH_POSTMASTER_PID) and the backends under it.
 */
import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { percentileOf } from './ledger-workload';
import { cpuSecondsOf, LEDGER_MAIN, serve, type Served } from './support/processes';
import { benchUuid, dispatchFact, INPUT_HASH, submitPath } from './support/submit-bodies';

const takeover = process.argv[2] === 'takeover';
const operations = takeover ? 0 : Number(process.argv[2] ?? 1_500);
const rounds = takeover ? Number(process.argv[3] ?? 5) : 0;
const main = (takeover ? undefined : process.argv[3]) ?? LEDGER_MAIN;
const WORKERS = 16;

/**
 * CPU seconds of the database server: the postmaster whose pid is BENCH_POSTMASTER_PID and its
 * children (the backends), or without it every process named `postgres` on this machine.
 */
function postgresCpuSeconds(): number {
  const postmaster = process.env.BENCH_POSTMASTER_PID;
  let total = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const parent = stat.split(') ')[1].split(' ')[1];
      const ours = postmaster
        ? pid === postmaster || parent === postmaster
        : readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
      if (ours) total += cpuSecondsOf(Number(pid));
    } catch {
      // ended meanwhile
    }
  }
  return total;
}

async function post(baseUrl: string, ref: string, events: unknown[]): Promise<number> {
  const response = await fetch(`${baseUrl}${submitPath(ref)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ events }),
  });
  const body = (await response.json()) as { position?: number };
  if (response.status !== 200 || typeof body.position !== 'number')
    throw new Error(`${ref}: ${response.status} ${JSON.stringify(body)}`);
  return body.position;
}

async function listed(baseUrl: string, run: string, position: number): Promise<number> {
  const response = await fetch(`${baseUrl}/v1/operations?run_id=${run}&wait_for_position=${position}`);
  if (response.status !== 200) throw new Error(`list: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { items: unknown[] }).items.length;
}

async function start(dataDir: string, databaseUrl: string): Promise<Served> {
  return serve(
    main,
    {
      LEDGER_DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
      LEDGER_STORE: 'postgres',
      DATABASE_URL: databaseUrl,
    },
    async (baseUrl) => (await fetch(`${baseUrl}/health/ready`)).ok,
  );
}

async function roleOf(instance: Served): Promise<string | undefined> {
  try {
    const health = (await (await fetch(`${instance.baseUrl}/health/ready`)).json()) as {
      details?: { projections?: { read_models?: string } };
    };
    return health.details?.projections?.read_models;
  } catch {
    return undefined;
  }
}

/** Kills the projector `rounds` times and prints how long the other instance took to project. */
async function measureTakeover(databaseUrl: string): Promise<void> {
  const times: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const dirs = [0, 1].map(() => mkdtempSync(join(tmpdir(), 'ledger-pg-bench-')));
    const instances: Served[] = [];
    try {
      for (const dir of dirs) instances.push(await start(dir, databaseUrl));
      let roles: Array<string | undefined> = [];
      while (!roles.includes('projector')) roles = await Promise.all(instances.map(roleOf));
      const projector = instances[roles.indexOf('projector')];
      const survivor = instances[1 - roles.indexOf('projector')];
      const killed = performance.now();
      projector.child.kill('SIGKILL');
      while ((await roleOf(survivor)) !== 'projector') await new Promise((resolve) => setTimeout(resolve, 20));
      times.push(Math.round(performance.now() - killed));
    } finally {
      for (const instance of instances) await instance.stop();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log(JSON.stringify({ takeover_ms: times }));
}

async function main_(): Promise<void> {
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) throw new Error('DATABASE_URL (a server this bench may create a database on) is required');
  const name = `ledger_bench_${Date.now()}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  if (takeover) {
    try {
      await measureTakeover(url.toString());
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    }
    return;
  }
  const dirs = [0, 1].map(() => mkdtempSync(join(tmpdir(), 'ledger-pg-bench-')));
  const instances: Served[] = [];
  try {
    for (const dir of dirs) instances.push(await start(dir, url.toString()));
    const roles = await Promise.all(instances.map(async (instance) => (await roleOf(instance)) ?? 'projects its own'));
    const cpuBefore = instances.map((instance) => cpuSecondsOf(instance.pid));
    const dbBefore = postgresCpuSeconds();
    const crossReads: number[] = [];
    let next = 0;
    const label = `pgrm${Date.now() % 100_000}`;
    const began = performance.now();
    let last = 0;
    const worker = async () => {
      for (let n = next++; n < operations; n = next++) {
        const ref = `${label}_run_${n}/op_${n}`;
        const run = `${label}_run_${n}`;
        const [writer, reader] = n % 2 ? [instances[1], instances[0]] : [instances[0], instances[1]];
        await post(writer.baseUrl, ref, [
          {
            event_id: benchUuid(label, n),
            type: 'StepPlanned',
            data: { run_id: run, tool: 'create_invoice', side_effect: 'write', input_hash: INPUT_HASH },
          },
        ]);
        const position = await post(reader.baseUrl, ref, [dispatchFact(label, n)]);
        last = Math.max(last, position);
        if (n % 10 === 0) {
          // A read on the other instance, waiting for the write this one acknowledged.
          const asked = performance.now();
          if ((await listed(writer.baseUrl, run, position)) !== 1) throw new Error(`${ref} not listed`);
          crossReads.push(performance.now() - asked);
        }
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, worker));
    const loaded = performance.now();
    // Both instances' lists have caught up with the whole load.
    await Promise.all(instances.map((instance) => listed(instance.baseUrl, `${label}_run_0`, last)));
    const caughtUp = performance.now();
    const cpu = instances.map((instance, index) => cpuSecondsOf(instance.pid) - cpuBefore[index]);
    const db = postgresCpuSeconds() - dbBefore;
    crossReads.sort((a, b) => a - b);
    const steps = operations * 2;
    console.log(
      JSON.stringify(
        {
          build: main,
          roles,
          operations,
          submits: steps,
          workers: WORKERS,
          load_s: +((loaded - began) / 1000).toFixed(2),
          both_lists_caught_up_after_ms: Math.round(caughtUp - loaded),
          submits_per_s: Math.round(steps / ((loaded - began) / 1000)),
          cpu_s: { instance_a: +cpu[0].toFixed(2), instance_b: +cpu[1].toFixed(2), postgres: +db.toFixed(2) },
          cpu_ms_per_submit: +(((cpu[0] + cpu[1] + db) * 1000) / steps).toFixed(3),
          cross_instance_read_ms: {
            n: crossReads.length,
            p50: +percentileOf(crossReads, 0.5).toFixed(1),
            p95: +percentileOf(crossReads, 0.95).toFixed(1),
            max: +crossReads[crossReads.length - 1].toFixed(1),
          },
        },
        null,
        2,
      ),
    );
  } finally {
    for (const instance of instances) await instance.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

main_().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
