import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ConfigError } from '../config/ledger-config';

/**
 * Signing secrets at rest (docs/webhooks.md, "Signing secrets at rest"): AES-256-GCM with the key of
 * LEDGER_WEBHOOK_SECRET_KEY, a fresh 96-bit nonce per secret, the subscription's id as additional
 * data (a wrapped secret copied onto another row does not open). Stored as
 * `wrapped:v1:<nonce>.<ciphertext>.<tag>`, each part base64url.
 */
const WRAPPED = 'wrapped:v1:';

export function isWrapped(stored: string): boolean {
  return stored.startsWith(WRAPPED);
}

/** 32 bytes, as 64 hex digits or as base64 (`openssl rand -hex 32`, `openssl rand -base64 32`). */
export function parseSecretKey(raw: string | undefined): Buffer | undefined {
  if (raw === undefined || raw === '') return undefined;
  const text = raw.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(text)
    ? Buffer.from(text, 'hex')
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(text)
      ? Buffer.from(text, 'base64')
      : undefined;
  if (key?.length !== 32) {
    throw new ConfigError(
      'LEDGER_WEBHOOK_SECRET_KEY must be 32 bytes as 64 hex digits or base64 (for example `openssl rand -hex 32`)',
    );
  }
  return key;
}

export class SecretBox {
  constructor(private readonly key: Buffer) {}

  wrap(secret: string, subscriptionId: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce).setAAD(Buffer.from(subscriptionId, 'utf8'));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return `${WRAPPED}${[nonce, sealed, cipher.getAuthTag()].map((part) => part.toString('base64url')).join('.')}`;
  }

  /** Throws when the stored text was not wrapped with this key for this subscription. */
  unwrap(stored: string, subscriptionId: string): string {
    const [nonce, sealed, tag] = stored
      .slice(WRAPPED.length)
      .split('.')
      .map((part) => Buffer.from(part, 'base64url'));
    const decipher = createDecipheriv('aes-256-gcm', this.key, nonce).setAAD(Buffer.from(subscriptionId, 'utf8'));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
  }
}

/** What a store has to say at start about its secrets, for the start-up log. */
export type SecretsAtRest = { wrapped: true; newlyWrapped: number } | { wrapped: false; plain: number };

/** A subscription's stored secrets, as a store reads them at start. */
export interface StoredSecrets {
  id: string;
  secret: string;
  previous_secret: string | null;
}

/** A plain secret a store must replace with its wrapped form, on the subscription's row. */
export interface SecretToWrap {
  id: string;
  column: 'secret' | 'previous_secret';
  wrapped: string;
}

/**
 * At start, whatever the store: with a key, plain secrets (rows made before it was set) are to be
 * wrapped, and every wrapped one must open with it; without one, wrapped secrets cannot be used, so
 * the service does not start (docs/webhooks.md, "Signing secrets at rest"). `where` names the store
 * in the refusal. A rotation's previous secret is sealed like the current one (same row, same
 * additional data).
 */
export function sealSecrets(
  stored: readonly StoredSecrets[],
  box: SecretBox | undefined,
  where: string,
): { atRest: SecretsAtRest; toWrap: SecretToWrap[] } {
  const rows = stored.flatMap((row) => [
    { id: row.id, secret: row.secret, column: 'secret' as const },
    ...(row.previous_secret ? [{ id: row.id, secret: row.previous_secret, column: 'previous_secret' as const }] : []),
  ]);
  const wrapped = rows.filter((row) => isWrapped(row.secret));
  if (!box) {
    if (wrapped.length > 0) {
      throw new ConfigError(
        `${where} holds ${wrapped.length} webhook signing secret(s) wrapped with LEDGER_WEBHOOK_SECRET_KEY, which is not set: ` +
          'start with the same key again; to stop using a key, end those subscriptions (DELETE /v1/admin/webhooks/{id}) while it is set',
      );
    }
    return { atRest: { wrapped: false, plain: rows.filter((row) => row.secret !== '').length }, toWrap: [] };
  }
  const unopened = wrapped.filter((row) => {
    try {
      box.unwrap(row.secret, row.id);
      return false;
    } catch {
      return true;
    }
  });
  if (unopened.length > 0) {
    throw new ConfigError(
      `LEDGER_WEBHOOK_SECRET_KEY does not open ${unopened.length} webhook signing secret(s) in ${where} (${unopened[0].id}): ` +
        'it is not the key they were wrapped with',
    );
  }
  const plain = rows.filter((row) => row.secret !== '' && !isWrapped(row.secret));
  return {
    atRest: { wrapped: true, newlyWrapped: plain.length },
    toWrap: plain.map((row) => ({ id: row.id, column: row.column, wrapped: box.wrap(row.secret, row.id) })),
  };
}

/** A stored secret as it signs: opened when it was wrapped. */
export function openSecret(stored: string, subscriptionId: string, box: SecretBox | undefined): string {
  return box && isWrapped(stored) ? box.unwrap(stored, subscriptionId) : stored;
}
