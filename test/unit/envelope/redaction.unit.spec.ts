import { isCardNumber, isSecretKeyName, passesLuhn, redactDeep, redactText } from '@recovery-ledger/core';
import { SecretScanner, stringsOf } from '../../../src/ledger/secret-scanner';
import { SECRET_CORPUS } from '../../support/secret-corpus';

const scanner = new SecretScanner();

describe('redaction', () => {
  it('the corpus holds at least 40 shapes, each named once', () => {
    expect(SECRET_CORPUS.length).toBeGreaterThanOrEqual(40);
    expect(new Set(SECRET_CORPUS.map(([name]) => name)).size).toBe(SECRET_CORPUS.length);
  });

  it.each(SECRET_CORPUS)(
    'redacts a %s (the detector and the shapes and names known here, together)',
    async (_name, text, secret) => {
      const detect = await scanner.detectorFor([text]);
      const { text: redacted, kinds } = redactText(text, { detect });
      expect(redacted).not.toContain(secret);
      expect(kinds.length).toBeGreaterThan(0);
      expect(redacted).toMatch(/\[REDACTED:[a-z_]+\]/);
    },
  );

  it('the detector is what catches the shapes not known here (without it they would be stored)', async () => {
    const onlyDetected = SECRET_CORPUS.filter(([, text, secret]) => redactText(text).text.includes(secret));
    expect(onlyDetected.length).toBeGreaterThanOrEqual(8);
    const detect = await scanner.detectorFor(onlyDetected.map(([, text]) => text));
    for (const [, text, secret] of onlyDetected) expect(redactText(text, { detect }).text.includes(secret)).toBe(false);
  });

  it('a scan of many texts at once attributes each finding to its own text', async () => {
    const texts = SECRET_CORPUS.map(([, text]) => text);
    const detect = await scanner.detectorFor(['plain words first', ...texts]);
    expect(detect('plain words first')).toEqual([]);
    for (const [, text, secret] of SECRET_CORPUS)
      expect(redactText(text, { detect }).text.includes(secret)).toBe(false);
  });

  it('a text cannot switch the detector off for what follows it (secretlint-disable)', async () => {
    const npm = SECRET_CORPUS.find(([name]) => name === 'npm token') as [string, string, string];
    const detect = await scanner.detectorFor(['// secretlint-disable', npm[1]]);
    expect(detect(npm[1]).length).toBe(1);
  });

  it('leaves ordinary text and numbers alone', () => {
    for (const text of [
      'invoice inv_123 for 1234 EUR',
      'order 1234567890123 shipped',
      'run_81/step_4',
      'retry after 30 seconds',
      'basic authentication failed',
      'created at 1733212345677',
    ]) {
      expect(redactText(text)).toEqual({ text, kinds: [] });
    }
  });

  it('checks card numbers by Luhn and by network prefix and length', () => {
    expect(passesLuhn('4111111111111111')).toBe(true);
    expect(passesLuhn('4111111111111112')).toBe(false);
    expect(isCardNumber('4111111111111111')).toBe(true);
    // Luhn-valid, but a millisecond timestamp, not a card network's number.
    expect(passesLuhn('1733212345677')).toBe(true);
    expect(isCardNumber('1733212345677')).toBe(false);
  });

  it('walks nested values and keys, recording each path', () => {
    const { value, redactions } = redactDeep({
      a: ['ok', 'Bearer abcdefghijklmnopqr'],
      b: { sk_live_abcdefghijkl: 1 },
    });
    expect(JSON.stringify(value)).not.toMatch(/abcdefghijklmnopqr|sk_live_abcdefghijkl/);
    expect(redactions.map((r) => r.path)).toEqual(['a[1]', 'b.<key>']);
  });

  it('redacts a value under a secret key name whatever its type, and a card sent as a JSON number', () => {
    const { value, redactions } = redactDeep({
      password: 'x9',
      client_secret: 123456,
      nested: { Authorization: { scheme: 'custom' } },
      tokens_used: 42,
      max_tokens: 10,
      card: 4111111111111111,
      amount: 1250,
    });
    expect(value).toEqual({
      password: '[REDACTED:named_secret]',
      client_secret: '[REDACTED:named_secret]',
      nested: { Authorization: '[REDACTED:named_secret]' },
      tokens_used: 42,
      max_tokens: 10,
      card: '[REDACTED:card_number]',
      amount: 1250,
    });
    expect(redactions.map((r) => `${r.path}:${r.kind}`)).toEqual([
      'password:named_secret',
      'client_secret:named_secret',
      'nested.Authorization:named_secret',
      'card:card_number',
    ]);
  });

  it('knows secret key names in their common spellings', () => {
    for (const name of [
      'password',
      'DB_PASSWORD',
      'clientSecret',
      'api-key',
      'X-Api-Key',
      'private_key',
      'aws_secret_access_key',
      'access_token',
      'authorization',
      'session_id',
      'credentials',
    ]) {
      expect([name, isSecretKeyName(name)]).toEqual([name, true]);
    }
    for (const name of ['tool', 'max_tokens', 'tokens_used', 'author', 'field', 'verification_tool', 'key_count']) {
      expect([name, isSecretKeyName(name)]).toEqual([name, false]);
    }
  });

  it('stringsOf gives every string and key of a value', () => {
    expect([...stringsOf({ a: ['x', 1, { b: 'y' }] })].sort()).toEqual(['a', 'b', 'x', 'y']);
  });
  it('submits scanned in the same turn share a lint, and each is told only of its own texts', async () => {
    const fresh = new SecretScanner();
    const shared = (SECRET_CORPUS.find(([name]) => name === 'npm token') as [string, string, string])[1];
    const detectors = await Promise.all(
      SECRET_CORPUS.map(([, text], index) => fresh.detectorFor([`plain words of submit ${index}`, text, shared])),
    );
    SECRET_CORPUS.forEach(([, text, secret], index) => {
      const detect = detectors[index];
      expect(detect(`plain words of submit ${index}`)).toEqual([]);
      expect(redactText(text, { detect }).text.includes(secret)).toBe(false);
      expect(detect(shared).length).toBeGreaterThan(0);
      // A text another submit sent in the same turn is not this submit's: nothing is said of it.
      const other = SECRET_CORPUS[(index + 1) % SECRET_CORPUS.length][1];
      if (other !== text && other !== shared) expect(detect(other)).toEqual([]);
    });
  });
});

describe('the secret scanner in a long-running process', () => {
  it("leaves nothing behind in the process's performance timeline (secretlint's profiler is off)", async () => {
    const { performance } = await import('node:perf_hooks');
    const before = performance.getEntriesByType('mark').length;
    for (let index = 0; index < 50; index++) await scanner.detectorFor([`a message ${index}`, `another ${index}`]);
    expect(performance.getEntriesByType('mark').length).toBe(before);
  });
});
