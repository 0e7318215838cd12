/**
 * The Restate server of the tool-step figure: the binary shipped in the registry package
 * `@restatedev/restate-server` (its per-platform package), installed into bench/.peers. One node
 * with every role, a fresh base directory, TCP only on 127.0.0.1 with free ports, the RocksDB
 * write-ahead logs fsynced (the default, stated here so a changed default cannot pass unnoticed).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { peerFile } from '../peers';
import { freePort } from '../processes';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RestateServer {
  pid: number;
  ingressUrl: string;
  adminUrl: string;
  register(deploymentUrl: string): Promise<void>;
  /** Completed invocations whose idempotency key is LIKE `pattern`, from the admin query API. */
  completed(pattern: string): Promise<number>;
  stop(): Promise<void>;
}

export function restateBinary(): string | undefined {
  const file = peerFile(`@restatedev/restate-server-${process.platform}-${process.arch}`, 'bin', 'restate-server');
  return existsSync(file) ? file : undefined;
}

export async function startRestateServer(binary: string, baseDir: string): Promise<RestateServer> {
  const [ingress, admin, fabric] = [await freePort(), await freePort(), await freePort()];
  const child: ChildProcess = spawn(binary, ['--no-logo'], {
    env: {
      ...process.env,
      RESTATE_BASE_DIR: baseDir,
      RESTATE_LISTEN_MODE: 'tcp',
      RESTATE_BIND_IP: '127.0.0.1',
      RESTATE_BIND_PORT: String(fabric),
      RESTATE_INGRESS__BIND_PORT: String(ingress),
      RESTATE_ADMIN__BIND_PORT: String(admin),
      RESTATE_DISABLE_TELEMETRY: 'true',
      RESTATE_LOG_FILTER: 'warn',
      RESTATE_BIFROST__LOCAL__ROCKSDB_DISABLE_WAL_FSYNC: 'false',
      RESTATE_LOG_SERVER__ROCKSDB_DISABLE_WAL_FSYNC: 'false',
      RESTATE_WORKER__STORAGE__ROCKSDB_DISABLE_WAL_FSYNC: 'false',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => (output = (output + chunk).slice(-20_000)));
  child.stderr?.on('data', (chunk) => (output = (output + chunk).slice(-20_000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const ingressUrl = `http://127.0.0.1:${ingress}`;
  const adminUrl = `http://127.0.0.1:${admin}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`restate-server exited (${child.exitCode}): ${output}`);
    const ready = await fetch(`${adminUrl}/health`).then(
      (r) => r.ok,
      () => false,
    );
    const ingressUp =
      ready &&
      (await fetch(`${ingressUrl}/restate/health`).then(
        (r) => r.ok,
        () => false,
      ));
    if (ingressUp) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`restate-server did not start in time: ${output}`);
    }
    await sleep(100);
  }
  return {
    pid: child.pid ?? 0,
    ingressUrl,
    adminUrl,
    register: async (deploymentUrl) => {
      const response = await fetch(`${adminUrl}/deployments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ uri: deploymentUrl, force: true }),
      });
      if (!response.ok)
        throw new Error(
          `registering ${deploymentUrl} with restate-server: ${response.status} ${await response.text()}`,
        );
    },
    completed: async (pattern) => {
      // The pattern is built from [a-z0-9_/%] only: safe inside the literal.
      const response = await fetch(`${adminUrl}/query`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({
          query: `SELECT count(*) AS n FROM sys_invocation WHERE idempotency_key LIKE '${pattern}' AND status = 'completed'`,
        }),
      });
      if (!response.ok) throw new Error(`restate admin query: ${response.status} ${await response.text()}`);
      const { rows } = (await response.json()) as { rows: Array<{ n: number }> };
      return Number(rows[0]?.n ?? 0);
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
