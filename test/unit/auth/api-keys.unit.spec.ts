import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findKey, parseApiKeys } from '../../../src/auth/api-keys';
import { bearerToken } from '../../../src/auth/bearer';
import { loadApiKeyEntries } from '../../../src/auth/load-keys';
import { ConfigError, loadConfig } from '../../../src/config/ledger-config';

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
const RUNTIME = 'runtime-key-0123456789abcdef';
const AUDITOR = 'auditor-key-fedcba9876543210';

describe('API key entries', () => {
  it('reads key:role:tenant and sha256:<hex>:role:tenant into the same kind of entry', () => {
    const [plain, hashed] = parseApiKeys([`${RUNTIME}:runtime:acme`, `sha256:${sha256Hex(AUDITOR)}:auditor:globex`]);
    expect(plain).toMatchObject({ role: 'runtime', tenant: 'acme', id: `key_${sha256Hex(RUNTIME).slice(0, 12)}` });
    expect(hashed).toMatchObject({ role: 'auditor', tenant: 'globex', id: `key_${sha256Hex(AUDITOR).slice(0, 12)}` });
    // A key and its hash configured either way have the same id: the actor does not depend on the form.
    expect(parseApiKeys([`sha256:${sha256Hex(RUNTIME).toUpperCase()}:runtime:acme`])[0].id).toBe(plain.id);
  });

  it('keeps no plain key in the parsed entries', () => {
    const entries = parseApiKeys([`${RUNTIME}:runtime:acme`]);
    expect(JSON.stringify(entries)).not.toContain(RUNTIME);
  });

  it.each([
    ['not key:role:tenant', 'no-separators-here-at-all', /is not key:role:tenant/],
    ['too many parts', `${RUNTIME}:runtime:acme:extra`, /is not key:role:tenant/],
    ['a short key', 'short:runtime:acme', /at least 16 characters/],
    [
      'an unknown role',
      `${RUNTIME}:root:acme`,
      /role must be one of runtime, approver, operator, auditor, admin, metrics/,
    ],
    ['a metrics key with a tenant', `${RUNTIME}:metrics:acme`, /a metrics key's tenant is \*/],
    ['a tenant key with the metrics tenant', `${RUNTIME}:admin:*`, /tenant must match/],
    ['a tenant with a colon-free but invalid name', `${RUNTIME}:runtime:Acme`, /tenant must match/],
    ['a hash of the wrong length', 'sha256:abcd:runtime:acme', /64 hex digits/],
  ])('refuses %s, naming the entry by its position, never by its key', (_what, entry, message) => {
    let error: unknown;
    try {
      parseApiKeys([`${AUDITOR}:auditor:acme`, entry]);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/^API key entry 2/);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain(
      entry.split(':')[0] === 'sha256' ? entry.split(':')[1] : entry.split(':')[0],
    );
  });

  it('finds a presented key among the entries, and nothing for an unknown key or for the hash itself', () => {
    const entries = parseApiKeys([`${RUNTIME}:runtime:acme`, `sha256:${sha256Hex(AUDITOR)}:auditor:acme`]);
    expect(findKey(entries, RUNTIME)?.role).toBe('runtime');
    expect(findKey(entries, AUDITOR)?.role).toBe('auditor');
    expect(findKey(entries, `${RUNTIME}x`)).toBeUndefined();
    expect(findKey(entries, sha256Hex(AUDITOR))).toBeUndefined();
    expect(findKey([], RUNTIME)).toBeUndefined();
  });

  it('answers the first entry when one key is configured twice (a later line cannot widen it)', () => {
    const entries = parseApiKeys([`${RUNTIME}:auditor:acme`, `${RUNTIME}:admin:acme`]);
    expect(findKey(entries, RUNTIME)?.role).toBe('auditor');
  });
});

describe('the bearer token of an Authorization header', () => {
  it.each([
    ['Bearer abc.def-123', 'abc.def-123'],
    ['bearer abc', 'abc'],
    ['BEARER   abc  ', 'abc'],
    ['Bearer\tabc', 'abc'],
  ])('reads %j', (header, token) => {
    expect(bearerToken(header)).toBe(token);
  });

  it.each([
    undefined,
    '',
    'Bearer',
    'Bearer ',
    'Basic dXNlcjpwYXNz',
    'Token abc',
    'Bearer a b',
    'xBearer abc',
    ['Bearer a', 'Bearer b'],
  ])('refuses %j', (header) => {
    expect(bearerToken(header)).toBeUndefined();
  });
});

describe('keys from the environment and from LEDGER_API_KEYS_FILE', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-keys-unit-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('joins both, skipping blank lines and comments in the file', () => {
    const file = join(dir, 'keys');
    writeFileSync(file, `# rotated 2026-12\n\n  sha256:${sha256Hex(AUDITOR)}:auditor:acme  \r\n# old: nothing\n`);
    const config = loadConfig({ LEDGER_API_KEYS: `${RUNTIME}:runtime:acme`, LEDGER_API_KEYS_FILE: file });
    expect(loadApiKeyEntries(config)).toEqual([`${RUNTIME}:runtime:acme`, `sha256:${sha256Hex(AUDITOR)}:auditor:acme`]);
  });

  it('has no keys (local mode) when neither is set', () => {
    expect(loadApiKeyEntries(loadConfig({}))).toEqual([]);
  });
});
