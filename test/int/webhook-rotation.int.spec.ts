/**
 * A rotation's previous secret at rest, on a real SQLite file: wrapped like the current one when
 * LEDGER_WEBHOOK_SECRET_KEY is set, wrapped at start when the key is set after the rotation, and
 * dropped when the subscription ends (docs/webhooks.md, "Rotating a secret").
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteWebhookStore } from '../../src/adapters/sqlite/sqlite-webhook.store';
import { parseSecretKey } from '../../src/webhooks/webhook-secret-box';
import { newSecret } from '../../src/webhooks/webhook.service';
import type { Subscription } from '../../src/webhooks/webhook-store.port';

const key = parseSecretKey('33'.repeat(32)) as Buffer;

function subscription(secret: string): Subscription {
  return {
    id: 'whk_rotation',
    tenant: 'acme',
    url: 'https://ops.example/hooks',
    secret,
    kinds: ['step.escalated'],
    unknown_after_ms: 1000,
    premature_refusals: 3,
    created_at: '2026-12-04T10:00:00.000Z',
    created_position: 0,
    active: true,
  };
}

describe('a rotated-out secret at rest', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'webhook-rotation-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const fileText = (file: string) =>
    ['', '-wal'].map((suffix) => readFileSync(`${file}${suffix}`, { flag: 'a+' }).toString('latin1')).join('');

  it('is wrapped with the key, opens again after a restart, and is dropped when the subscription ends', async () => {
    const file = join(dir, 'webhooks.sqlite');
    const [first, second] = [newSecret(), newSecret()];
    const store = new SqliteWebhookStore(file, { secretKey: key });
    await store.addSubscription(subscription(first));
    expect(await store.rotateSecret('acme', 'whk_rotation', second, '2026-12-05T10:00:00.000Z')).toBe(true);
    expect(await store.rotateSecret('other', 'whk_rotation', newSecret(), '2026-12-05T10:00:00.000Z')).toBe(false);
    await store.close();
    expect(fileText(file)).not.toContain(first.slice(6));
    expect(fileText(file)).not.toContain(second.slice(6));

    const reopened = new SqliteWebhookStore(file, { secretKey: key });
    expect((await reopened.subscriptions('acme'))[0]).toMatchObject({
      secret: second,
      previous_secret: first,
      previous_secret_until: '2026-12-05T10:00:00.000Z',
    });
    expect(await reopened.deactivate('acme', 'whk_rotation')).toBe(true);
    expect((await reopened.subscriptions('acme', false))[0]).not.toHaveProperty('previous_secret');
    await reopened.close();
  });

  it('is wrapped at start when the key is set after the rotation', async () => {
    const file = join(dir, 'webhooks.sqlite');
    const [first, second] = [newSecret(), newSecret()];
    const plain = new SqliteWebhookStore(file);
    await plain.addSubscription(subscription(first));
    await plain.rotateSecret('acme', 'whk_rotation', second, '2026-12-05T10:00:00.000Z');
    await plain.close();
    expect(fileText(file)).toContain(first.slice(6));

    const sealed = new SqliteWebhookStore(file, { secretKey: key });
    expect(sealed.secretsAtRest).toEqual({ wrapped: true, newlyWrapped: 2 });
    expect((await sealed.subscriptions('acme'))[0]).toMatchObject({ secret: second, previous_secret: first });
    await sealed.close();
    expect(fileText(file)).not.toContain(first.slice(6));
  });
});
