/**
 * docker-compose.yml checked without a container engine (`docker compose config` is not there to
 * run): parsed with a YAML library, then its services, ports, volumes, health checks, certificates
 * and connection strings checked against each other, so a rename in one place that the others do
 * not follow fails here rather than in a cluster that never forms.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';

const REPO = resolve(__dirname, '../..');

interface Service {
  image?: string;
  build?: unknown;
  profiles?: string[];
  command?: string[] | string;
  entrypoint?: string;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  networks?: string[] | Record<string, { ipv4_address?: string }>;
  network_mode?: string;
  user?: string;
}

interface Compose {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
  networks: Record<string, { ipam?: { config?: Array<{ subnet: string }> } }>;
}

const compose = parse(readFileSync(join(REPO, 'docker-compose.yml'), 'utf8'), { merge: true }) as Compose;
const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
const services = compose.services;

/** `${VAR:-default}` as compose resolves it when VAR is unset. */
const interpolate = (value: string) => value.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
const option = (service: Service, name: string) =>
  (service.command as string[]).find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
const mounts = (service: Service) =>
  (service.volumes ?? []).map((volume) => {
    const [source, target, mode] = volume.split(':');
    return { source, target, mode };
  });
/** A mount of a file or directory of the repository (a path), not a named volume. */
const isBind = (source: string) => source.startsWith('.') || source.startsWith('/');
const nodes = Object.entries(services).filter(
  ([, service]) =>
    service.command &&
    Array.isArray(service.command) &&
    service.command.some((arg) => arg.startsWith('--cluster-size=')),
);
const SERVER_IMAGE = interpolate(services.eventstore.image as string);
/** `[host_ip:]host_port:container_port`, as compose reads a short port mapping. */
const portOf = (mapping: string) => {
  const parts = mapping.split(':');
  return {
    hostIp: parts.length === 3 ? parts[0] : '0.0.0.0',
    hostPort: parts[parts.length - 2],
    containerPort: parts[parts.length - 1].split(' ')[0],
  };
};

describe('docker-compose.yml', () => {
  it('pins the server image to a KurrentDB LTS release, overridable by KURRENTDB_IMAGE, and documents the variable', () => {
    expect(SERVER_IMAGE).toMatch(/^docker\.kurrent\.io\/kurrent-lts\/kurrentdb:\d+\.\d+\.\d+$/);
    for (const [, service] of [['eventstore', services.eventstore], ...nodes] as Array<[string, Service]>) {
      expect(service.image).toMatch(/^\$\{KURRENTDB_IMAGE:-[^}]+\}$/);
      expect(interpolate(service.image as string)).toBe(SERVER_IMAGE);
    }
    expect(readFileSync(join(REPO, 'docs/eventstoredb.md'), 'utf8')).toContain('KURRENTDB_IMAGE');
  });

  it('uses a pinned, current certificate tool that renews node certificates from the same CA', () => {
    const certGen = services['cert-gen'];
    expect(certGen.image).toBe('ghcr.io/eventstore/es-gencert-cli:1.3.0');
    const script = (certGen.command as string[]).join('\n');
    // The CA only when missing; node certificates when missing or due, overwriting the old ones.
    expect(script).toMatch(/if \[ ! -f ca\/ca\.crt \]; then\s+es-gencert-cli create-ca/);
    expect(script).toMatch(/create-node -force -days 365/);
    expect(script).toMatch(/-mtime \+300/);
  });

  it('publishes each host port once, on loopback only, and maps the ledgers to the port they listen on', () => {
    const published = Object.values(services).flatMap((service) => (service.ports ?? []).map(portOf));
    const hostPorts = published.map(({ hostPort }) => hostPort);
    expect(new Set(hostPorts).size).toBe(hostPorts.length);
    // The example keys and the insecure node are for this machine: nothing is published beyond it.
    expect(published.filter(({ hostIp }) => hostIp !== '127.0.0.1')).toEqual([]);
    for (const name of ['ledger', 'ledger-cluster', 'ledger-pg-a', 'ledger-pg-b']) {
      const service = services[name];
      expect(service.build).toBe('.');
      const { containerPort } = portOf((service.ports as string[])[0]);
      expect(containerPort).toBe(service.environment?.PORT);
      expect(dockerfile).toContain(`EXPOSE ${containerPort}`);
      // Bound beyond loopback, so keys are required (docs/contract.md §8).
      expect(service.environment?.HOST).toBe('0.0.0.0');
      expect(interpolate(service.environment?.LEDGER_API_KEYS as string)).toMatch(/\w+:\w+:\w+/);
    }
  });

  it('takes its keys from LEDGER_API_KEYS (kept out of git and of the image), the example keys in its stead', () => {
    for (const name of ['ledger', 'ledger-cluster', 'ledger-pg-a', 'ledger-pg-b']) {
      expect({ name, keys: services[name].environment?.LEDGER_API_KEYS }).toEqual({
        name,
        keys: expect.stringMatching(/^\$\{LEDGER_API_KEYS:-[^}]+\}$/),
      });
    }
    for (const ignore of ['.gitignore', '.dockerignore']) {
      expect({ ignore, lines: readFileSync(join(REPO, ignore), 'utf8').split('\n') }).toEqual({
        ignore,
        lines: expect.arrayContaining(['.env']),
      });
    }
  });

  it('gives the example keys every role, so an approval-gated step can be approved and an escalation handled', () => {
    for (const name of ['ledger', 'ledger-cluster']) {
      const roles = interpolate(services[name].environment?.LEDGER_API_KEYS as string)
        .split(',')
        .map((entry) => entry.split(':')[1]);
      expect({ name, roles: [...roles].sort() }).toEqual({
        name,
        roles: ['admin', 'approver', 'auditor', 'operator', 'runtime'],
      });
    }
  });

  it('declares every named volume it mounts and mounts every one it declares, data where the server keeps it', () => {
    const used = new Set(
      Object.values(services).flatMap((service) =>
        mounts(service)
          .map((mount) => mount.source)
          .filter((source) => !isBind(source)),
      ),
    );
    expect([...used].sort()).toEqual(Object.keys(compose.volumes).sort());
    const dataDir = '/var/lib/kurrentdb';
    for (const [, service] of [['eventstore', services.eventstore], ...nodes] as Array<[string, Service]>) {
      const data = mounts(service).filter((mount) => mount.target === dataDir);
      expect(data).toHaveLength(1);
    }
    // No two servers share a data volume.
    const dataVolumes = [services.eventstore, ...nodes.map(([, node]) => node)].map(
      (service) => mounts(service).find((m) => m.target === dataDir)?.source,
    );
    expect(new Set(dataVolumes).size).toBe(dataVolumes.length);
    for (const name of ['ledger', 'ledger-cluster'])
      expect(mounts(services[name]).some((mount) => mount.target === '/data')).toBe(true);
    expect(dockerfile).toMatch(/LEDGER_DATA_DIR=\/data/);
  });

  it('has a health check for every service another waits on being healthy', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
        expect(services[dependency]).toBeDefined();
        if (condition === 'service_healthy')
          expect({ name, dependency, healthcheck: services[dependency].healthcheck !== undefined }).toEqual({
            name,
            dependency,
            healthcheck: true,
          });
        if (condition === 'service_completed_successfully') expect(dependency).toBe('cert-gen');
      }
    }
    // Insecure node over HTTP, TLS nodes over HTTPS (self-signed CA: --insecure for curl only).
    expect(services.eventstore.healthcheck?.test.join(' ')).toContain('http://localhost:2113/health/live');
    for (const [, node] of nodes)
      expect(node.healthcheck?.test.join(' ')).toContain('https://localhost:2113/health/live');
    // The ledgers are built from the Dockerfile, whose HEALTHCHECK they inherit.
    expect(dockerfile).toMatch(/^HEALTHCHECK [\s\S]*?\/health\/live/m);
  });

  it('points the single-node ledger at the insecure node by its service name', () => {
    expect(services.eventstore.command).toEqual(['--insecure']);
    const url = new URL(services.ledger.environment?.EVENTSTORE_CONNECTION_STRING as string);
    expect(url.protocol).toBe('esdb:');
    expect(`${url.hostname}:${url.port}`).toBe('eventstore:2113');
    expect(url.searchParams.get('tls')).toBe('false');
    expect(services.ledger.depends_on?.eventstore?.condition).toBe('service_healthy');
    expect(services.ledger.environment?.LEDGER_STORE).toBe('eventstoredb');
  });

  describe('the cluster profile', () => {
    const network = compose.networks.cluster;
    const subnet = network.ipam?.config?.[0]?.subnet as string;
    const addressOf = (service: Service) =>
      (service.networks as Record<string, { ipv4_address: string }>).cluster.ipv4_address;
    const certScript = () => (services['cert-gen'].command as string[]).join('\n');

    it('has as many nodes as each says the cluster has, each on a fixed address in the subnet', () => {
      expect(nodes.length).toBe(3);
      for (const [, node] of nodes) {
        expect(option(node, 'cluster-size')).toBe(String(nodes.length));
        expect(addressOf(node).startsWith(subnet.replace(/\.0\/24$/, '.'))).toBe(true);
        expect(option(node, 'replication-ip')).toBe(addressOf(node));
        expect(option(node, 'discover-via-dns')).toBe('false');
      }
    });

    it('seeds each node with the other nodes', () => {
      for (const [name, node] of nodes) {
        const seeds = (option(node, 'gossip-seed') as string).split(',').sort();
        const others = nodes
          .filter(([other]) => other !== name)
          .map(([, other]) => `${addressOf(other)}:2113`)
          .sort();
        expect(seeds).toEqual(others);
      }
    });

    it('gives each node a certificate for the name it advertises to clients and the address it replicates on', () => {
      // cert-gen issues node$n for 172.30.240.1$n and node$n.eventstore.
      expect(certScript()).toContain('-ip-addresses 127.0.0.1,172.30.240.1$$n -dns-names localhost,node$$n.eventstore');
      nodes.forEach(([name, node], index) => {
        const n = index + 1;
        expect(name).toBe(`node${n}.eventstore`);
        expect(option(node, 'advertise-host-to-client-as')).toBe(name);
        expect(addressOf(node)).toBe(`172.30.240.1${n}`);
        expect(option(node, 'certificate-file')).toBe(`/certs/node${n}/node.crt`);
        expect(option(node, 'certificate-private-key-file')).toBe(`/certs/node${n}/node.key`);
        expect(option(node, 'trusted-root-certificates-path')).toBe('/certs/ca');
        expect(mounts(node)).toContainEqual({ source: 'cluster-certs', target: '/certs', mode: 'ro' });
        expect(node.depends_on?.['cert-gen']?.condition).toBe('service_completed_successfully');
      });
      expect(mounts(services['cert-gen'])).toContainEqual({
        source: 'cluster-certs',
        target: '/certs',
        mode: undefined,
      });
    });

    it('connects the cluster ledger with every node as a gossip seed, over TLS checked against the generated CA', () => {
      const ledger = services['ledger-cluster'];
      const connection = ledger.environment?.EVENTSTORE_CONNECTION_STRING as string;
      // One scheme, then host:port seeds separated by commas (the client's form for a cluster).
      const match = /^esdb:\/\/(?:[^@/]+@)?([^/?]+)\?(.*)$/.exec(connection);
      expect(match).not.toBeNull();
      const seeds = (match as RegExpExecArray)[1].split(',');
      expect(seeds.sort()).toEqual(nodes.map(([name]) => `${name}:2113`).sort());
      const params = new URLSearchParams((match as RegExpExecArray)[2]);
      expect(params.get('tls')).toBe('true');
      const caFile = params.get('tlsCAFile') as string;
      expect(caFile).toBe('/certs/ca/ca.crt');
      expect(mounts(ledger)).toContainEqual({ source: 'cluster-certs', target: '/certs', mode: 'ro' });
      // $all is read by the projections: an admin user, whose password the docs say to change.
      expect(connection).toMatch(/^esdb:\/\/admin:[^@]+@/);
      expect(ledger.networks).toEqual(['cluster']);
      for (const [name] of nodes) expect(ledger.depends_on?.[name]?.condition).toBe('service_healthy');
    });
  });
  describe('the postgres profile', () => {
    const balancer = services['ledger-pg'];
    const instances = Object.entries(services).filter(
      ([, service]) => service.build === '.' && service.environment?.LEDGER_STORE === 'postgres',
    );
    const configMount = () => mounts(balancer).find((mount) => isBind(mount.source));
    const config = () => readFileSync(join(REPO, configMount()?.source as string), 'utf8');
    /** The config's lines without comments, trimmed. */
    const directives = () =>
      config()
        .split('\n')
        .map((line) => line.replace(/#.*$/, '').trim())
        .filter((line) => line.length > 0);

    it('runs two instances on one database, the PostgreSQL server image pinned', () => {
      expect(services.postgres.image).toMatch(/^postgres:\d+\.\d+-bookworm$/);
      expect(instances.map(([name]) => name).sort()).toEqual(['ledger-pg-a', 'ledger-pg-b']);
      const urls = new Set(instances.map(([, service]) => service.environment?.DATABASE_URL));
      expect(urls.size).toBe(1);
      expect(new URL([...urls][0] as string).host).toBe('postgres:5432');
      for (const [, service] of instances) {
        expect(service.profiles).toEqual(['postgres']);
        expect(service.depends_on?.postgres?.condition).toBe('service_healthy');
      }
      // Each instance keeps a data directory of its own (docs/postgres.md).
      const data = instances.map(([, service]) => mounts(service).find((mount) => mount.target === '/data')?.source);
      expect(new Set(data).size).toBe(instances.length);
    });

    it('puts a balancer of a pinned image in front of them, on one loopback port, its config committed and read-only', () => {
      expect(balancer.image).toMatch(/^haproxy:\d+\.\d+\.\d+-alpine$/);
      expect(balancer.profiles).toEqual(['postgres']);
      expect((balancer.ports ?? []).map(portOf)).toEqual([
        { hostIp: '127.0.0.1', hostPort: '3004', containerPort: '3000' },
      ]);
      expect(configMount()).toEqual({
        source: './compose/haproxy-postgres.cfg',
        target: '/usr/local/etc/haproxy/haproxy.cfg',
        mode: 'ro',
      });
      // The port published is the one the config binds.
      expect(directives()).toContain(`bind :${portOf((balancer.ports as string[])[0]).containerPort}`);
      for (const [name] of instances) expect(balancer.depends_on?.[name]).toBeDefined();
    });

    it('sends requests round-robin to every instance, each by its service name and port, checked on /health/ready', () => {
      const servers = directives()
        .filter((line) => line.startsWith('server '))
        .map((line) => line.split(/\s+/));
      expect(servers.map(([, name]) => name).sort()).toEqual(instances.map(([name]) => name).sort());
      for (const [, name, address, ...options] of servers) {
        expect({ name, address }).toEqual({ name, address: `${name}:${services[name].environment?.PORT}` });
        expect(options).toContain('check');
      }
      expect(directives()).toEqual(
        expect.arrayContaining([
          'balance roundrobin',
          'option httpchk',
          // With a Host: without one an instance in local mode answers 421 (src/http/security/loopback-host.ts).
          'http-check send meth GET uri /health/ready ver HTTP/1.1 hdr Host localhost',
          'http-check expect status 200',
        ]),
      );
      // Long polls wait up to 30 s (docs/contract.md): the balancer must wait longer for an answer.
      const serverTimeout = directives().find((line) => line.startsWith('timeout server '));
      expect(Number(/(\d+)s$/.exec(serverTimeout ?? '')?.[1])).toBeGreaterThan(30);
    });
  });
});
