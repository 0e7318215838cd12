/**
 * The auth matrix, generated from the route table of the built application: every route Fastify
 * serves × (no key, a wrong key, runtime, approver, operator, auditor, admin, metrics) × (the caller's own tenant, another
 * tenant's), each with the status the rules of issue 6 / docs/contract.md §8 give it.
 *
 * The route table is read from the built app itself (a child process builds it with createApp,
 * records every route Fastify registers, and reads each controller handler's @RequireAccess
 * metadata), so a route added tomorrow is in the matrix without anyone listing it: it fails here
 * if it declares no access rule, if Fastify serves it outside a Nest controller (where the guard
 * does not run), or if its path names a parameter this file has no fixture for.
 *
 * The expected statuses come from the rules written out below, not from src/auth/access.ts, so
 * a change to the role table is a change to this test too.
 */
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { join, resolve } from 'node:path';
import { ERROR_REGISTRY } from '@recovery-ledger/core/errors/error-registry';
import { opPath } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const ROOT = resolve(__dirname, '../..');
const DIST = join(ROOT, 'dist/src');

// ---- the route table, from the built application -------------------------------------------------

interface ServedRoute {
  method: string;
  url: string;
}
interface DeclaredRoute extends ServedRoute {
  access: string | null;
  handler: string;
}

const ROUTE_TABLE_SCRIPT = `
const { join } = require('node:path');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const load = require('node:module').createRequire(${JSON.stringify(join(ROOT, 'package.json'))});
const DIST = ${JSON.stringify(DIST)};
const { createApp } = require(join(DIST, 'app.js'));
const { loadConfig } = require(join(DIST, 'config/ledger-config.js'));
const { ACCESS_KEY } = require(join(DIST, 'auth/access.js'));
const { ModulesContainer } = load('@nestjs/core');
const { RequestMethod } = load('@nestjs/common');
const { PATH_METADATA, METHOD_METADATA } = load('@nestjs/common/constants');
(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-routes-'));
  const config = loadConfig({ ...process.env, LEDGER_DATA_DIR: dir, LOG_LEVEL: 'silent' });
  const app = await createApp({ config });
  const served = [];
  app.getHttpAdapter().getInstance().addHook('onRoute', (route) => {
    for (const method of [].concat(route.method)) served.push({ method, url: route.url });
  });
  await app.init();
  const trim = (path) => String(path ?? '').replace(/^\\/+|\\/+$/g, '');
  const declared = [];
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of module.controllers.values()) {
      const controller = wrapper.metatype;
      if (!controller) continue;
      const bases = [].concat(Reflect.getMetadata(PATH_METADATA, controller) ?? '');
      for (const name of Object.getOwnPropertyNames(controller.prototype)) {
        const handler = controller.prototype[name];
        if (name === 'constructor' || typeof handler !== 'function') continue;
        const paths = Reflect.getMetadata(PATH_METADATA, handler);
        if (paths === undefined) continue;
        const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler)];
        const access = Reflect.getMetadata(ACCESS_KEY, handler) ?? Reflect.getMetadata(ACCESS_KEY, controller) ?? null;
        for (const base of bases) {
          for (const path of [].concat(paths)) {
            declared.push({ method, url: '/' + [trim(base), trim(path)].filter(Boolean).join('/'), access, handler: controller.name + '.' + name });
          }
        }
      }
    }
  }
  await app.close();
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(JSON.stringify({ served, declared }));
  process.exit(0);
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

function readRouteTable(): { served: ServedRoute[]; declared: DeclaredRoute[] } {
  const output = execFileSync(process.execPath, ['-e', ROUTE_TABLE_SCRIPT], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return JSON.parse(output);
}

// ---- the rules, as issue 6 states them -------------------------------------------------------------

type Role = 'runtime' | 'approver' | 'operator' | 'auditor' | 'admin' | 'metrics';
type Access = 'public' | 'read' | 'write' | 'work' | 'admin' | 'metrics';
const ACCESS_LEVELS: readonly Access[] = ['public', 'read', 'write', 'work', 'admin', 'metrics'];

/**
 * runtime: submit and read its tenant, and take, renew and release work items (the feed is the
 * runtime's); approver: read it and submit approvals only; operator: read it and submit operator
 * facts only (docs/contract.md §4.10); auditor: read; admin: read, rebuild
 * projections, export, its tenant's metrics; metrics: the whole scrape only.
 */
const ALLOWED: Record<Role, readonly Access[]> = {
  runtime: ['read', 'write', 'work'],
  approver: ['read', 'write'],
  operator: ['read', 'write'],
  auditor: ['read'],
  admin: ['read', 'admin', 'metrics'],
  metrics: ['metrics'],
};

const key = (label: string) => `${label}-${createHash('sha256').update(label).digest('hex').slice(0, 24)}`;
const KEYS = {
  acmeRuntime: key('acme-runtime'),
  acmeAuditor: key('acme-auditor'),
  acmeAdmin: key('acme-admin'),
  acmeApprover: key('acme-approver'),
  acmeOperator: key('acme-operator'),
  metrics: key('metrics'),
  globexRuntime: key('globex-runtime'),
  globexAdmin: key('globex-admin'),
};
const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
const API_KEYS = [
  `${KEYS.acmeRuntime}:runtime:acme`,
  // The auditor's key is configured by its hash only: the matrix proves that form works too.
  `sha256:${sha256Hex(KEYS.acmeAuditor)}:auditor:acme`,
  `${KEYS.acmeAdmin}:admin:acme`,
  `${KEYS.acmeApprover}:approver:acme`,
  `${KEYS.acmeOperator}:operator:acme`,
  `${KEYS.metrics}:metrics:*`,
  `${KEYS.globexRuntime}:runtime:globex`,
  `${KEYS.globexAdmin}:admin:globex`,
].join(',');

type Credential = 'none' | 'wrong' | Role;
const CREDENTIALS: readonly Credential[] = [
  'none',
  'wrong',
  'runtime',
  'approver',
  'operator',
  'auditor',
  'admin',
  'metrics',
];
const AUTHORIZATION: Record<Credential, Record<string, string>> = {
  none: {},
  wrong: { authorization: `Bearer ${key('nobody')}` },
  runtime: { authorization: `Bearer ${KEYS.acmeRuntime}` },
  auditor: { authorization: `Bearer ${KEYS.acmeAuditor}` },
  admin: { authorization: `Bearer ${KEYS.acmeAdmin}` },
  approver: { authorization: `Bearer ${KEYS.acmeApprover}` },
  operator: { authorization: `Bearer ${KEYS.acmeOperator}` },
  metrics: { authorization: `Bearer ${KEYS.metrics}` },
};

type Side = 'own' | 'other';
const SIDES: readonly Side[] = ['own', 'other'];

// ---- what the matrix acts on ------------------------------------------------------------------------

const ACME_REF = 'run_acme/step_1';
const GLOBEX_REF = 'run_globex/step_1';
const ACME_PLAN = {
  event_id: randomUUID(),
  type: 'StepPlanned',
  data: { run_id: 'run_acme', tool: 'acme_tool', side_effect: 'write', input_hash: 'sha256:acme-input' },
};
const GLOBEX_TOOL = 'globex_secret_tool';
const GLOBEX_INPUT = 'sha256:globex-input-7f3a';
/** The worker holding globex's operation: who holds what is the tenant's data too. */
const GLOBEX_WORKER = 'globex-secret-worker';
const GLOBEX_PLAN = {
  event_id: randomUUID(),
  type: 'StepPlanned',
  data: { run_id: 'run_globex', tool: GLOBEX_TOOL, side_effect: 'write', input_hash: GLOBEX_INPUT },
};

/**
 * Path parameters that name a tenant's resource: the caller's own one, and one that exists only
 * in the other tenant, with the answer that other tenant's resource must get (as if it did not exist).
 */
const TENANT_PARAMS: Record<string, { own: string; other: string; notFound: string }> = {
  ref: { own: ACME_REF, other: GLOBEX_REF, notFound: 'OPERATION_NOT_FOUND' },
  run_id: { own: 'run_acme', other: 'run_globex', notFound: 'RUN_NOT_FOUND' },
};
/** Path parameters of public static files, and ids no tenant has (a webhook subscription's). */
const PUBLIC_PARAMS: Record<string, string> = {
  file: 'app.js',
  asset: 'swagger-ui.css',
  id: 'whk_no_such_subscription',
};

interface Exchange {
  body?: unknown;
  /** What an allowed caller gets; `other` only where a body decides it (a submit). */
  own: number;
  other?: { status: number; code?: string };
  /** What a role the route admits gets when the body holds a fact it may not record. */
  byRole?: Partial<Record<Role, { status: number; code: string }>>;
}

/** Routes that take a body (and what an allowed caller gets for it). Every POST needs one. */
const EXCHANGES: Record<string, (side: Side) => Exchange> = {
  // Own tenant: a resubmission of the plan, answered as the first time and storing nothing.
  // Other tenant: a dispatch for the other tenant's operation, which does not exist in the
  // caller's namespace: it cannot be acted on.
  'POST /v1/operations/:ref/events': (side) => ({
    body:
      side === 'own'
        ? { events: [ACME_PLAN] }
        : {
            events: [
              { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 1, input_hash: GLOBEX_INPUT } },
            ],
          },
    own: 200,
    other: { status: 409, code: 'STEP_NOT_PLANNED' },
    // A plan and a dispatch are the runtime's facts: an approver records approvals only, an
    // operator operator facts only.
    byRole: { approver: { status: 403, code: 'FORBIDDEN' }, operator: { status: 403, code: 'FORBIDDEN' } },
  }),
  'POST /v1/admin/projections/rebuild': () => ({ own: 202 }),
  'POST /v1/admin/verify': () => ({ own: 200 }),
  // A receiver nobody listens on: the matrix appends nothing after it, so nothing is sent.
  'POST /v1/admin/webhooks': () => ({ body: { url: 'https://hooks.example.com/hook' }, own: 201 }),
  'DELETE /v1/admin/webhooks/:id': () => ({ own: 404 }),
  'POST /v1/admin/webhooks/:id/rotate-secret': () => ({ body: {}, own: 404 }),
  'GET /v1/admin/webhooks/:id': () => ({ own: 404 }),
  'POST /v1/admin/webhooks/:id/test': () => ({ own: 404 }),
  'POST /v1/admin/webhooks/deliveries/:id/resend': () => ({ own: 404 }),
  // Leases are scoped by the caller's tenant: a lease id of no item in it holds nothing, in either.
  'POST /v1/operations/:ref/lease/renew': () => ({
    body: { lease_id: randomUUID() },
    own: 409,
    other: { status: 409, code: 'LEASE_LOST' },
  }),
  'POST /v1/operations/:ref/lease/release': () => ({
    body: { lease_id: randomUUID() },
    own: 200,
    other: { status: 200 },
  }),
};

/** Strings only the other tenant's data contains (never sent in an acme request). */
const GLOBEX_MARKERS = [GLOBEX_TOOL, GLOBEX_INPUT, GLOBEX_PLAN.event_id, GLOBEX_WORKER];

interface Case {
  route: DeclaredRoute & { served: string };
  credential: Credential;
  side: Side;
  path: string;
  body?: unknown;
  expect: { status: number | 'success'; code?: string };
}

function buildCases(route: DeclaredRoute & { served: string }): Case[] {
  const params = [...route.url.matchAll(/:([A-Za-z_]+)/g)].map((match) => match[1]);
  const tenantParam = params.find((name) => TENANT_PARAMS[name]);
  const exchangeOf = EXCHANGES[`${route.method} ${route.url}`];
  if (route.method !== 'GET' && !exchangeOf)
    throw new Error(`${route.method} ${route.url}: add an exchange (body and expected status) to EXCHANGES`);
  const cases: Case[] = [];
  for (const credential of CREDENTIALS) {
    for (const side of SIDES) {
      let path = route.url;
      for (const name of params) {
        const value = TENANT_PARAMS[name]?.[side] ?? PUBLIC_PARAMS[name];
        if (value === undefined)
          throw new Error(`${route.method} ${route.url}: add a fixture for the path parameter :${name}`);
        path = path.replace(`:${name}`, encodeURIComponent(value));
      }
      const exchange = exchangeOf?.(side);
      const access = route.access as Access;
      let expected: Case['expect'];
      if (access === 'public') expected = { status: exchange?.own ?? 'success' };
      else if (credential === 'none' || credential === 'wrong') expected = { status: 401, code: 'UNAUTHENTICATED' };
      else if (!ALLOWED[credential].includes(access)) expected = { status: 403, code: 'FORBIDDEN' };
      else if (exchange?.byRole?.[credential]) expected = exchange.byRole[credential] as Case['expect'];
      else if (side === 'other' && exchange?.other) expected = exchange.other;
      else if (side === 'other' && tenantParam) expected = { status: 404, code: TENANT_PARAMS[tenantParam].notFound };
      else expected = { status: exchange?.own ?? 'success' };
      cases.push({ route, credential, side, path, body: exchange?.body, expect: expected });
      // Fastify answers HEAD for every GET with the same handler, so through the same guard.
      if (route.method === 'GET')
        cases.push({ route: { ...route, served: 'HEAD' }, credential, side, path, expect: expected });
    }
  }
  return cases;
}

// ---- the run ------------------------------------------------------------------------------------------

interface Outcome {
  label: string;
  status: number;
  contentType: string;
  text: string;
  expect: Case['expect'];
  method: string;
  credential: Credential;
}

const describeCase = (c: Case) => `${c.route.served} ${c.route.url} as ${c.credential} on ${c.side} tenant (${c.path})`;

async function send(baseUrl: string, c: Case): Promise<Outcome> {
  const headers: Record<string, string> = { ...AUTHORIZATION[c.credential] };
  if (c.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${baseUrl}${c.path}`, {
    method: c.route.served,
    headers,
    body: c.body === undefined ? undefined : JSON.stringify(c.body),
  });
  return {
    label: describeCase(c),
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    text: await response.text(),
    expect: c.expect,
    method: c.route.served,
    credential: c.credential,
  };
}

function rowsOf(dataDir: string): Array<Record<string, unknown>> {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT * FROM events ORDER BY position').all() as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
}

describe('the auth matrix over every served route', () => {
  let ledger: LedgerProcess;
  let routes: Array<DeclaredRoute & { served: string }>;
  let served: ServedRoute[];
  let declared: DeclaredRoute[];
  const outcomes: Outcome[] = [];
  let globexRowsBefore: string;

  beforeAll(async () => {
    ({ served, declared } = readRouteTable());
    routes = declared.map((route) => ({ ...route, served: route.method }));

    ledger = await startLedger({ env: { LEDGER_API_KEYS: API_KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
    const post = (ref: string, token: string, events: unknown[]) =>
      fetch(`${ledger.baseUrl}${opPath(ref)}/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ events }),
      }).then(async (response) => ({ status: response.status, body: (await response.json()) as { position: number } }));
    // Both tenants have an operation in flight, so the recovery list and the run summary of each
    // have something to show (and to leak, if isolation failed).
    expect((await post(ACME_REF, KEYS.acmeRuntime, [ACME_PLAN])).status).toBe(200);
    expect(
      (
        await post(ACME_REF, KEYS.acmeRuntime, [
          { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 1, input_hash: 'sha256:acme-input' } },
        ])
      ).status,
    ).toBe(200);
    expect((await post(GLOBEX_REF, KEYS.globexRuntime, [GLOBEX_PLAN])).status).toBe(200);
    // A globex worker holds its operation through the matrix, so GET /v1/operations/:ref/lease has
    // a holder to leak to an acme key if tenants were not kept apart.
    const taken = await fetch(`${ledger.baseUrl}/v1/work?worker=${GLOBEX_WORKER}&wait_ms=5000&lease_ms=600000`, {
      headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
    });
    expect(
      ((await taken.json()) as { items: Array<{ lease: { holder: string } }> }).items.map((item) => item.lease.holder),
    ).toEqual([GLOBEX_WORKER]);
    const last = await post(GLOBEX_REF, KEYS.globexRuntime, [
      { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 1, input_hash: GLOBEX_INPUT } },
    ]);
    expect(last.status).toBe(200);
    // Read-your-writes: the projections have applied everything before the matrix reads them.
    const caughtUp = await fetch(
      `${ledger.baseUrl}/v1/runs/run_globex?wait_for_position=${last.body.position}&wait_timeout_ms=20000`,
      {
        headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
      },
    );
    expect(caughtUp.status).toBe(200);
    globexRowsBefore = JSON.stringify(
      rowsOf(ledger.dataDir).filter((row) => String(row.stream).startsWith('op-globex:')),
    );

    // Reads first, then what changes something (a rebuild empties the read models while it runs).
    const cases = routes
      .flatMap(buildCases)
      .sort((a, b) => Number(a.route.method !== 'GET') - Number(b.route.method !== 'GET'));
    for (const c of cases) outcomes.push(await send(ledger.baseUrl, c));
  }, 120_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  test('the route table is what the service serves, and every route declares an access rule', () => {
    const key = (route: ServedRoute) => `${route.method} ${route.url}`;
    const declaredKeys = new Set(declared.map(key));
    // Fastify adds HEAD for every GET; anything else it serves must come from a controller, or
    // it bypasses the guard.
    const outsideNest = served.filter(
      (route) => !declaredKeys.has(key(route)) && !(route.method === 'HEAD' && declaredKeys.has(`GET ${route.url}`)),
    );
    expect(outsideNest).toEqual([]);
    const withoutRule = declared.filter((route) => !ACCESS_LEVELS.includes(route.access as Access));
    expect(withoutRule.map((route) => `${key(route)} (${route.handler})`)).toEqual([]);
    // The table is the real one: the spec's core routes are in it.
    // The work feed is for runtime keys only: an approver key must not take or renew work items.
    const feed = declared.filter((route) =>
      ['GET /v1/work', 'POST /v1/operations/:ref/lease/renew', 'POST /v1/operations/:ref/lease/release'].includes(
        key(route),
      ),
    );
    expect(feed.map((route) => route.access)).toEqual(['work', 'work', 'work']);
    for (const expected of [
      'POST /v1/operations/:ref/events',
      'GET /v1/operations/:ref',
      'GET /v1/operations/:ref/events',
      'GET /v1/operations/:ref/lease',
      'GET /v1/schema/envelope',
    ]) {
      expect(declaredKeys).toContain(expected);
    }
  });

  test('every cell of the matrix answers its expected status', () => {
    const wrong = outcomes
      .filter(({ status, expect: e }) => (e.status === 'success' ? status < 200 || status > 299 : status !== e.status))
      .map(
        (o) =>
          `${o.label}: expected ${o.expect.status}${o.expect.code ? ` ${o.expect.code}` : ''}, got ${o.status} ${o.text.slice(0, 200)}`,
      );
    expect(wrong).toEqual([]);
    // The matrix is as wide as promised: every route × 8 credentials × 2 tenants (and HEAD for GET).
    expect(outcomes.length).toBe(routes.reduce((sum, route) => sum + (route.method === 'GET' ? 32 : 16), 0));
  });

  test('every refusal is a problem+json with its registered code', () => {
    const wrong = outcomes
      .filter((o) => o.expect.code !== undefined && o.method !== 'HEAD')
      .filter((o) => {
        const body = JSON.parse(o.text);
        const code = body.code as keyof typeof ERROR_REGISTRY;
        return (
          !o.contentType.startsWith('application/problem+json') ||
          code !== o.expect.code ||
          ERROR_REGISTRY[code]?.status !== o.status
        );
      })
      .map((o) => `${o.label}: ${o.contentType} ${o.text.slice(0, 200)}`);
    expect(wrong).toEqual([]);
  });

  test("no answer to an acme key carries anything of globex's data", () => {
    // The metrics key belongs to no tenant: the operator's scraper sees the whole process (below).
    const leaks = outcomes
      .filter((o) => o.credential !== 'metrics' && GLOBEX_MARKERS.some((marker) => o.text.includes(marker)))
      .map((o) => o.label);
    expect(leaks).toEqual([]);
  });

  test("/metrics: an admin sees its tenant's series only, nothing process-wide; the metrics key sees all", () => {
    const scrape = (credential: Credential) =>
      outcomes.find(
        (o) =>
          o.method === 'GET' && o.label.startsWith('GET /metrics ') && o.credential === credential && o.status === 200,
      )?.text ?? '';
    const admin = scrape('admin');
    expect(admin).toMatch(/tenant="acme"/);
    expect(admin).not.toMatch(/tenant="globex"|tenant=""/);
    // Process-wide series (CPU, memory, group commits, projection lag) show every tenant's load together.
    expect(admin).not.toMatch(
      /^(process_|nodejs_|ledger_store_group_commit|ledger_projection_lag|ledger_projection_readable)/m,
    );
    const all = scrape('metrics');
    expect(all).toMatch(/tenant="globex"/);
    expect(all).toMatch(/^process_cpu_user_seconds_total/m);
  });

  test("another tenant's operation is refused without a trace in either namespace", () => {
    const rows = rowsOf(ledger.dataDir);
    expect(JSON.stringify(rows.filter((row) => String(row.stream).startsWith('op-globex:')))).toBe(globexRowsBefore);
    // The refused dispatch for globex's ref created nothing under acme's name either.
    expect(rows.filter((row) => row.stream === `op-acme:${GLOBEX_REF}`)).toEqual([]);
  });

  test('the isolation check can see a leak: globex reading its own data finds its markers', async () => {
    const own = await fetch(`${ledger.baseUrl}/v1/recovery`, {
      headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
    });
    expect(own.status).toBe(200);
    expect(await own.text()).toContain(GLOBEX_REF);
    const exported = await fetch(`${ledger.baseUrl}/v1/admin/export`, {
      headers: { authorization: `Bearer ${KEYS.globexAdmin}` },
    });
    expect(exported.status).toBe(200);
    expect(await exported.text()).toContain(GLOBEX_TOOL);
    const lease = await fetch(`${ledger.baseUrl}${opPath(GLOBEX_REF)}/lease`, {
      headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
    });
    expect(await lease.json()).toMatchObject({ held: true, holder: GLOBEX_WORKER });
  });
});
