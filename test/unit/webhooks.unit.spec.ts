import { reactionsTo, retryDelayMs } from '../../src/webhooks/notification-rules';
import {
  isPrivateAddress,
  isPrivateHost,
  PrivateAddressError,
  publicOnlyLookup,
} from '../../src/webhooks/webhook-address';
import { parseSecretKey, SecretBox } from '../../src/webhooks/webhook-secret-box';
import { signatureHeader, verifySignature } from '../../src/webhooks/webhook-signature';
import { urlRefusal } from '../../src/webhooks/webhook-url';
import { loadWebhookSettings } from '../../src/webhooks/webhook-settings';
import { failureCause } from '../../src/webhooks/webhook.service';
import { ConfigError } from '../../src/config/ledger-config';

const transition = (to: string) => ({
  type: 'TransitionRecorded',
  event_id: 'e1',
  position: 9,
  data: { from: 'dispatched', to, reason: 'X' },
  metadata: { tenant: 'acme', operation_ref: 'r', recorded_at: '2026-12-03T10:00:00.000Z' },
});

describe('webhook rules and signatures', () => {
  it('turns transitions into notifications, watches and resets; other events into nothing', () => {
    expect(reactionsTo(transition('escalated'))).toEqual([
      { do: 'reset_premature' },
      { do: 'notify', kind: 'step.escalated', key: 'e1' },
    ]);
    expect(reactionsTo(transition('awaiting_approval'))[1]).toEqual({
      do: 'notify',
      kind: 'approval.requested',
      key: 'e1',
    });
    expect(reactionsTo(transition('verifying'))[1]).toEqual({
      do: 'watch_unknown',
      transition_event_id: 'e1',
      since: '2026-12-03T10:00:00.000Z',
    });
    expect(reactionsTo(transition('retry_ready'))).toEqual([{ do: 'reset_premature' }]);
    expect(reactionsTo({ ...transition('escalated'), type: 'DispatchRefused' })).toEqual([]);
  });

  it('backs off by doubling, capped', () => {
    expect([1, 2, 3, 4, 5, 6].map((attempt) => retryDelayMs(attempt, 1000, 5000))).toEqual([
      1000, 2000, 4000, 5000, 5000, 5000,
    ]);
  });

  it('signs t.body with HMAC-SHA256 as Stripe does, and verifies against tampering, a wrong secret, age and rotation', () => {
    const body = '{"id":"dlv_1","type":"step.escalated"}';
    const header = signatureHeader('whsec_test', body, 1_764_756_000);
    // Computed independently: printf '1764756000.{"id":"dlv_1","type":"step.escalated"}' | openssl dgst -sha256 -hmac whsec_test
    expect(header).toBe('t=1764756000,v1=ce6bd58ff85c2eba2d1ff67ddaf2ae5d651668873e71e05b183e00e8dbcdb17e');
    const at = { nowSeconds: 1_764_756_010 };
    expect(verifySignature(header, body, 'whsec_test', at).ok).toBe(true);
    expect(verifySignature(header, body.replace('escalated', 'approved'), 'whsec_test', at)).toEqual({
      ok: false,
      reason: 'no_match',
    });
    expect(verifySignature(header, body, 'whsec_other', at)).toEqual({ ok: false, reason: 'no_match' });
    expect(verifySignature(header, body, 'whsec_test', { nowSeconds: 1_764_756_000 + 301 })).toEqual({
      ok: false,
      reason: 'too_old',
    });
    expect(verifySignature(`${header},v1=${'0'.repeat(64)}`, body, 'whsec_test', at).ok).toBe(true);
    expect(verifySignature('v1=abc', body, 'whsec_test', at)).toEqual({ ok: false, reason: 'malformed' });
  });
});

describe('where a webhook may go', () => {
  it('knows loopback, link-local, private, unique-local and metadata addresses, in every spelling a URL normalises', () => {
    for (const address of [
      '127.0.0.1',
      '127.9.9.9',
      '0.0.0.0',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.100.100.200',
      '::1',
      '::',
      'fe80::1',
      'fd00:ec2::254',
      'fc00::1',
      '::ffff:127.0.0.1',
      '::ffff:a9fe:a9fe',
      '64:ff9b::a00:1',
      '2002:7f00:1::1',
    ]) {
      expect([address, isPrivateAddress(address)]).toEqual([address, true]);
    }
    for (const address of ['93.184.216.34', '172.32.0.1', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect([address, isPrivateAddress(address)]).toEqual([address, false]);
    }
    for (const url of [
      'http://0x7f.1/h',
      'http://2130706433/h',
      'http://[::ffff:127.0.0.1]/h',
      'http://localhost./h',
      'http://api.localhost/h',
      'http://[fd00:ec2::254]/h',
      'http://0/h',
    ]) {
      expect([url, isPrivateHost(new URL(url).hostname)]).toEqual([url, true]);
    }
    expect(isPrivateHost(new URL('https://hooks.example.com/h').hostname)).toBe(false);
  });

  it('refuses a name that resolves to a private address when it is looked up for a delivery', async () => {
    const lookedUp = await new Promise<Error | null>((resolve) =>
      publicOnlyLookup('localhost', { all: true }, (error) => resolve(error)),
    );
    expect(lookedUp).toBeInstanceOf(PrivateAddressError);
  });

  it('refuses credentials in the query or fragment of a URL, by name and by shape, and private hosts unless allowed', () => {
    const refused = (url: string, allowPrivate = true) => urlRefusal(new URL(url), { allowPrivate });
    for (const url of [
      'https://hooks.example.com/h?token=abc',
      'https://hooks.example.com/h?key=abc',
      'https://hooks.example.com/h?sig=abc',
      'https://hooks.example.com/h?api_key=abc',
      'https://hooks.example.com/h?X-Amz-Signature=abc',
      'https://hooks.example.com/h?access_token=abc',
      'https://hooks.example.com/h?Client-Secret=abc',
      'https://hooks.example.com/h?password=abc',
      'https://hooks.example.com/h?x=ghp_0123456789abcdefghijABCDEFGHIJ012345',
      'https://hooks.example.com/h#token=abc',
    ]) {
      expect([url, refused(url)]).toEqual([url, expect.stringMatching(/must not carry a credential/)]);
    }
    expect(refused('https://hooks.example.com/h?tenant=acme&event=escalated&v=2')).toBeUndefined();
    expect(refused('http://127.0.0.1:8080/h', false)).toMatch(/private address/);
    expect(refused('http://127.0.0.1:8080/h', true)).toBeUndefined();
  });
});

describe('signing secrets at rest', () => {
  const key = parseSecretKey('11'.repeat(32)) as Buffer;

  it('wraps with AES-256-GCM: the secret is not in the stored text, and only the same key and subscription open it', () => {
    const box = new SecretBox(key);
    const stored = box.wrap('whsec_abc', 'whk_1');
    expect(stored).toMatch(/^wrapped:v1:/);
    expect(stored).not.toContain('whsec_abc');
    expect(box.unwrap(stored, 'whk_1')).toBe('whsec_abc');
    expect(() => box.unwrap(stored, 'whk_2')).toThrow();
    expect(() => new SecretBox(parseSecretKey('22'.repeat(32)) as Buffer).unwrap(stored, 'whk_1')).toThrow();
  });

  it('reads the key as 64 hex digits or base64 of 32 bytes, and refuses anything else', () => {
    expect(parseSecretKey(undefined)).toBeUndefined();
    expect(parseSecretKey(Buffer.alloc(32, 7).toString('base64'))?.equals(Buffer.alloc(32, 7))).toBe(true);
    expect(() => parseSecretKey('too-short')).toThrow(/LEDGER_WEBHOOK_SECRET_KEY must be 32 bytes/);
  });
});

describe('webhook settings and failure causes', () => {
  it('takes LEDGER_PUBLIC_BASE_URL without its trailing slash, and refuses one with a query, a fragment, credentials or another scheme', () => {
    expect(loadWebhookSettings({}).publicBaseUrl).toBeUndefined();
    expect(loadWebhookSettings({ LEDGER_PUBLIC_BASE_URL: 'https://ledger.example.com/' }).publicBaseUrl).toBe(
      'https://ledger.example.com',
    );
    expect(loadWebhookSettings({ LEDGER_PUBLIC_BASE_URL: 'https://example.com/ledger//' }).publicBaseUrl).toBe(
      'https://example.com/ledger',
    );
    for (const bad of [
      'ledger.example.com',
      'ftp://x.example',
      'https://x.example/?a=1',
      'https://x.example/#f',
      'https://u:p@x.example',
    ])
      expect(() => loadWebhookSettings({ LEDGER_PUBLIC_BASE_URL: bad })).toThrow(ConfigError);
  });

  it("says why a POST failed in the network's own words: the system code first, from the error or its cause", () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    expect(failureCause(refused)).toBe('ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9');
    expect(failureCause(new TypeError('fetch failed', { cause: refused }))).toBe(
      'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9',
    );
    expect(failureCause(new Error('no answer within 10000 ms'))).toBe('Error: no answer within 10000 ms');
  });
});
