/**
 * The console's files as the built service serves them (src/ui/ui-assets.ts), over real HTTP: the
 * page's one script is an ES module, and it and every module it imports (followed through their
 * `from './…'` lines) come back as JavaScript, byte for byte as committed, with the page's headers;
 * every module of the folder is reached that way. Nothing outside the assets folder is served,
 * whatever the path says: a dot segment, an encoded slash, a sub-path or an unknown name is a 404
 * problem.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const ASSETS = join(__dirname, '../../src/ui/assets');

/** A GET with its path sent exactly as written: fetch would resolve `..` before sending. */
function rawGet(baseUrl: string, path: string): Promise<{ status: number; contentType: string; body: string }> {
  return new Promise((resolve, reject) => {
    const call = httpRequest(`${baseUrl}/`, { method: 'GET', path }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, contentType: response.headers['content-type'] ?? '', body }),
      );
    });
    call.on('error', reject);
    call.end();
  });
}

/** The relative specifiers a module imports from (static `import … from` and `export … from`). */
function importsOf(source: string): string[] {
  return [...source.matchAll(/^(?:import|export)\s[^;]*?from\s+'(\.\/[^']+)';/gms)].map((match) => match[1]);
}

let ledger: LedgerProcess;

describe('the console files the service serves', () => {
  beforeAll(async () => {
    ledger = await startLedger();
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('serves the entry module and every module it imports as JavaScript, with the page policy', async () => {
    const page = await request<string>(ledger.baseUrl, 'GET', '/ui');
    expect(page.status).toBe(200);
    const scripts = [...page.body.matchAll(/<script\b([^>]*)>/g)].map((match) => match[1]);
    expect(scripts).toEqual([' type="module" src="/ui/app.js"']);

    const served = new Set<string>();
    const queue = ['app.js'];
    while (queue.length > 0) {
      const name = queue.shift() as string;
      if (served.has(name)) continue;
      served.add(name);
      const answer = await request<string>(ledger.baseUrl, 'GET', `/ui/${name}`);
      const policy = answer.headers.get('content-security-policy') ?? '';
      expect({ name, status: answer.status, type: answer.contentType }).toEqual({
        name,
        status: 200,
        type: 'text/javascript; charset=utf-8',
      });
      expect(policy).toContain("script-src 'self'");
      expect(policy).not.toContain('unsafe-inline');
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
      expect(answer.headers.get('referrer-policy')).toBe('no-referrer');
      expect(answer.headers.get('cache-control')).toBe('no-cache');
      expect(answer.body).toBe(readFileSync(join(ASSETS, name), 'utf8'));
      for (const specifier of importsOf(answer.body)) queue.push(specifier.slice(2));
    }
    // Every module of the folder is part of the page (none left behind by a refactor), and the
    // entry is not the only one.
    const modules = readdirSync(ASSETS).filter((file) => file.endsWith('.js'));
    expect([...served].sort()).toEqual(modules.sort());
    expect(served.size).toBeGreaterThan(1);
  });

  it.each([
    '/ui/../package.json',
    '/ui/assets/../../package.json',
    '/ui/..%2F..%2Fpackage.json',
    '/ui/%2e%2e%2f%2e%2e%2fpackage.json',
    '/ui/..%2Fui-assets.ts',
    '/ui/..',
    '/ui/ui-assets.ts',
    '/ui/assets/app.js',
    '/ui/app.js/x',
    '/ui/nope.js',
    '/ui/app.mjs',
  ])('answers %s with a 404 problem', async (path) => {
    const answer = await rawGet(ledger.baseUrl, path);
    expect({ path, status: answer.status, type: answer.contentType }).toEqual({
      path,
      status: 404,
      type: 'application/problem+json; charset=utf-8',
    });
    expect(JSON.parse(answer.body)).toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });
});
