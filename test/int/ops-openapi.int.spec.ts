/**
 * /docs and /docs/openapi.json on the built service: the served document is the committed
 * openapi.json (test/unit/artifacts.unit.spec.ts holds that one to the code), it covers every
 * route of docs/contract.md §9, and each operation says which key it needs.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

let ledger: LedgerProcess;

beforeAll(async () => {
  ledger = await startLedger({ env: { LEDGER_API_KEYS: 'ops-openapi-auditor-key-1:auditor:acme' } });
});

afterAll(async () => {
  await ledger.stop();
  ledger.cleanup();
});

describe('the OpenAPI document', () => {
  it('is served without a key and is the committed openapi.json', async () => {
    const served = await request(ledger.baseUrl, 'GET', '/docs/openapi.json');
    expect(served.status).toBe(200);
    expect(served.contentType).toMatch(/^application\/json/);
    expect(served.body).toEqual(JSON.parse(readFileSync(resolve(__dirname, '../../openapi.json'), 'utf8')));
  });

  it('documents every route of the HTTP contract (docs/contract.md §9) and the operational ones', async () => {
    const { paths } = (await request(ledger.baseUrl, 'GET', '/docs/openapi.json')).body;
    const routes = Object.entries(paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(routes).toEqual(
      expect.arrayContaining([
        'POST /v1/operations/{ref}/events',
        'GET /v1/operations/{ref}',
        'GET /v1/operations/{ref}/events',
        'GET /v1/operations/{ref}/evidence',
        'GET /v1/runs/{run_id}',
        'GET /v1/recovery',
        'GET /v1/metrics/trust',
        'GET /v1/schema/envelope',
        'GET /health/live',
        'GET /health/ready',
        'GET /metrics',
      ]),
    );
    // The page and the document itself are not API operations.
    expect(routes.some((route) => route.includes('/ui') || route.includes('/docs'))).toBe(false);
  });

  it('says per operation which key it needs, as the guard enforces it', async () => {
    const document = (await request(ledger.baseUrl, 'GET', '/docs/openapi.json')).body;
    expect(document.components.securitySchemes.api_key).toMatchObject({ type: 'http', scheme: 'bearer' });
    const submit = document.paths['/v1/operations/{ref}/events'].post;
    expect(submit.security).toEqual([{ api_key: [] }]);
    expect(submit.description).toContain('Needs a key with the role runtime or approver or operator (access `write`).');
    expect(Object.keys(submit.responses)).toEqual(expect.arrayContaining(['200', '401', '403']));
    expect(document.paths['/v1/operations/{ref}'].get.description).toContain(
      'runtime or approver or operator or auditor or admin',
    );
    for (const open of ['/health/live', '/health/ready', '/v1/schema/envelope'])
      expect(document.paths[open].get.security).toEqual([]);
    // And the guard agrees: a public route answers without a key, a read route does not.
    expect((await request(ledger.baseUrl, 'GET', '/v1/schema/envelope')).status).toBe(200);
    expect((await request(ledger.baseUrl, 'GET', '/v1/operations/x%2Fy')).status).toBe(401);
  });

  it('/docs serves Swagger UI from the service itself, with no inline script', async () => {
    const page = await request(ledger.baseUrl, 'GET', '/docs');
    expect(page.status).toBe(200);
    expect(page.contentType).toMatch(/^text\/html/);
    const scripts = [...(page.body as string).matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attributes, body] of scripts) {
      expect(attributes).toMatch(/src="\/docs\//);
      expect(body.trim()).toBe('');
    }
    for (const asset of [
      '/docs/swagger-ui.css',
      '/docs/swagger-ui-bundle.js',
      '/docs/swagger-ui-standalone-preset.js',
      '/docs/docs-init.js',
    ]) {
      const answer = await request(ledger.baseUrl, 'GET', asset);
      expect({ asset, status: answer.status }).toEqual({ asset, status: 200 });
    }
    expect((await request(ledger.baseUrl, 'GET', '/docs/package.json')).status).toBe(404);
  });
});
