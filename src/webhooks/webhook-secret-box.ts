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
