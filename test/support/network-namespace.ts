/**
 * A network namespace joined to this host by a veth pair, for a ledger instance whose link to
 * PostgreSQL is cut for real: the instance runs inside (`ip netns exec`), reaches the database at
 * the host end's address, and `silence()` takes the host end down, so every packet either way is
 * lost with no reset and no proxy in between. Unlike the in-test proxy (test/support/tcp-proxy.ts),
 * nothing then answers the server's keep-alive probes for the instance: the server's own bound is
 * what ends its sessions (docs/postgres.md, "Faults").
 *
 * The instance's HTTP port stays reachable whatever the link does: it listens on the namespace's
 * loopback, as every instance of the tests does, and is reached through a Unix socket (a file, which
 * no namespace cuts) between a forwarder inside the namespace and one in this process.
 *
 * Needs root and iproute2's `ip`; where either is missing, the tests say so in one line and skip,
 * unless LEDGER_REQUIRE_NETNS=1 (.ci/run), where the missing capability is a failing test.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startLedger, type LedgerProcess, type StartOptions } from './ledger-process';

/** Set by .ci/run: there a machine that cannot make a namespace fails the run instead of skipping the tests. */
export const NETNS_REQUIRED = process.env.LEDGER_REQUIRE_NETNS === '1';

export const NETNS_SKIP_LINE =
  'network-namespace tests skipped: they need root and iproute2 (`ip netns`, veth pairs). To run them: ' +
  'as root, apt-get install iproute2, then npx jest test/e2e/postgres-instances';

/** Whether a namespace and a veth pair can be made here: tried once, for real, and removed. */
export function namespacesAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  const name = `ledger-probe-${randomBytes(3).toString('hex')}`;
  if (spawnSync('ip', ['netns', 'add', name], { stdio: 'ignore' }).status !== 0) return false;
  spawnSync('ip', ['netns', 'delete', name], { stdio: 'ignore' });
  return true;
}

export interface NamespaceLink {
  /** The namespace's name (`ip netns exec <name> …`). */
  name: string;
  /** The host end's address: what a process inside connects to. */
  hostAddress: string;
  /** The namespace end's address: where a process inside connects from. */
  namespaceAddress: string;
  /** Takes the host end down: every packet either way is lost, no reset is sent. */
  silence(): void;
  /** Brings the host end up again (its address and route come back with it). */
  restore(): void;
  /** Removes the namespace and the pair; safe to call twice, and called at exit if the tests did not. */
  remove(): void;
}

const run = (args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });

/** A fresh /30 of 10.213.0.0/16 that no interface of this host holds yet. */
function freeSubnet(): [string, string] {
  const taken = execFileSync('ip', ['-4', '-o', 'addr', 'show'], { encoding: 'utf8' });
  for (;;) {
    const [third, fourth] = randomBytes(2);
    const base = `10.213.${third}.${fourth & 0xfc}`;
    const prefix = base.slice(0, base.lastIndexOf('.') + 1);
    const host = `${prefix}${(fourth & 0xfc) + 1}`;
    const inside = `${prefix}${(fourth & 0xfc) + 2}`;
    if (!taken.includes(` ${host}/`) && !taken.includes(` ${inside}/`)) return [host, inside];
  }
}

/** A namespace with its end of a veth pair up at one address of a /30, the host end at the other. */
export function createNamespaceLink(): NamespaceLink {
  const tag = randomBytes(4).toString('hex');
  const name = `ledger-${tag}`;
  // Interface names are at most 15 characters.
  const hostDevice = `lgh${tag}`;
  const namespaceDevice = `lgn${tag}`;
  const [hostAddress, namespaceAddress] = freeSubnet();
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    process.off('exit', remove);
    // Removing the namespace removes its end, and with it the pair; the host end is removed too in
    // case the pair was made but not moved into the namespace.
    spawnSync('ip', ['netns', 'delete', name], { stdio: 'ignore' });
    spawnSync('ip', ['link', 'delete', hostDevice], { stdio: 'ignore' });
  };
  process.on('exit', remove);
  try {
    run(['netns', 'add', name]);
    run(['link', 'add', hostDevice, 'type', 'veth', 'peer', 'name', namespaceDevice]);
    run(['link', 'set', namespaceDevice, 'netns', name]);
    run(['addr', 'add', `${hostAddress}/30`, 'dev', hostDevice]);
    run(['link', 'set', hostDevice, 'up']);
    run(['netns', 'exec', name, 'ip', 'addr', 'add', `${namespaceAddress}/30`, 'dev', namespaceDevice]);
    run(['netns', 'exec', name, 'ip', 'link', 'set', namespaceDevice, 'up']);
    run(['netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up']);
  } catch (error) {
    remove();
    throw error;
  }
  return {
    name,
    hostAddress,
    namespaceAddress,
    silence: () => run(['link', 'set', hostDevice, 'down']),
    restore: () => run(['link', 'set', hostDevice, 'up']),
    remove,
  };
}

/**
 * Run inside the namespace: passes every connection to a Unix socket on to the ledger's port on the
 * namespace's loopback, and says `ready` once it listens.
 */
const INSIDE_FORWARDER = `
const net = require('node:net');
const [socketPath, port] = process.argv.slice(1);
net.createServer((inbound) => {
  const outbound = net.connect(Number(port), '127.0.0.1');
  for (const socket of [inbound, outbound]) socket.on('error', () => { inbound.destroy(); outbound.destroy(); });
  inbound.pipe(outbound).pipe(inbound);
}).listen(socketPath, () => process.stdout.write('ready\\n'));
`;

export interface NamespacedLedger extends LedgerProcess {
  /** Closes the forwarders to its HTTP port (once the ledger is stopped or killed). */
  closeForwarders(): Promise<void>;
}

/**
 * The built service (test/support/ledger-process.ts) started inside `link`'s namespace, its HTTP
 * port reached at a loopback port of this host (`baseUrl`), whatever the link to the database does.
 */
export async function startLedgerInNamespace(link: NamespaceLink, options: StartOptions): Promise<NamespacedLedger> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-netns-'));
  const socketPath = join(dir, 'http.sock');
  const port = await freePort();
  const inside: ChildProcess = spawn(
    'ip',
    ['netns', 'exec', link.name, process.execPath, '-e', INSIDE_FORWARDER, socketPath, String(port)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let outside: Server | undefined;
  const sockets = new Set<Socket>();
  const closeForwarders = async () => {
    for (const socket of sockets) socket.destroy();
    if (outside) await new Promise<void>((resolve) => outside?.close(() => resolve()));
    outside = undefined;
    if (inside.exitCode === null && inside.signalCode === null) {
      const exited = new Promise<void>((resolve) => inside.once('exit', () => resolve()));
      inside.kill('SIGKILL');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      let said = '';
      inside.stdout?.on('data', (chunk: Buffer) => {
        said += chunk;
        if (said.includes('ready')) resolve();
      });
      inside.stderr?.on('data', (chunk: Buffer) => (said += chunk));
      inside.once('exit', (code) => reject(new Error(`the forwarder in ${link.name} exited with ${code}: ${said}`)));
    });
    outside = createServer((inbound) => {
      const outbound = connect(socketPath);
      for (const socket of [inbound, outbound]) {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
        socket.on('error', () => {
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound).pipe(inbound);
    });
    const hostPort = await freePort();
    await new Promise<void>((resolve, reject) => {
      outside?.once('error', reject);
      outside?.listen(hostPort, '127.0.0.1', () => resolve());
    });
    const ledger = await startLedger({
      ...options,
      port,
      wrap: ['ip', 'netns', 'exec', link.name],
      baseUrl: `http://127.0.0.1:${hostPort}`,
    });
    return { ...ledger, closeForwarders };
  } catch (error) {
    await closeForwarders();
    throw error;
  }
}
