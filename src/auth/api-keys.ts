import { createHash, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../config/ledger-config';
import { TENANT_ID_PATTERN } from '../store/stream-names';
import type { Role } from './caller';
import { NO_TENANT, ROLES } from './roles';

export interface ApiKeyEntry {
  /** A stable, non-secret id derived from the key's hash: what events record as the actor. */
  id: string;
  role: Role;
  tenant: string;
  sha256: Buffer;
}

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * `key:role:tenant`, or `sha256:<64 hex>:role:tenant` so the plain key never sits in configuration.
 * A malformed entry stops the start: a typo must not silently drop a key or widen access.
 */
export function parseApiKeys(entries: readonly string[]): ApiKeyEntry[] {
  return entries.map((entry, index) => {
    const parts = entry.split(':');
    const hashed = parts[0] === 'sha256' && parts.length === 4;
    if (!hashed && parts.length !== 3) throw new ConfigError(`API key entry ${index + 1} is not key:role:tenant`);
    const [secret, role, tenant] = hashed ? parts.slice(1) : parts;
    if (hashed && !/^[0-9a-f]{64}$/i.test(secret))
      throw new ConfigError(`API key entry ${index + 1}: sha256 needs 64 hex digits`);
    if (!hashed && secret.length < 16)
      throw new ConfigError(`API key entry ${index + 1}: a key needs at least 16 characters`);
    if (!ROLES.includes(role as Role))
      throw new ConfigError(`API key entry ${index + 1}: role must be one of ${ROLES.join(', ')}`);
    // A metrics key sees the whole process and no tenant's data: its tenant is `*`, and only its.
    if (role === 'metrics' ? tenant !== NO_TENANT : !TENANT_ID_PATTERN.test(tenant)) {
      throw new ConfigError(
        `API key entry ${index + 1}: ${role === 'metrics' ? `a metrics key's tenant is ${NO_TENANT}` : `tenant must match ${TENANT_ID_PATTERN}`}`,
      );
    }
    const digest = hashed ? Buffer.from(secret, 'hex') : sha256(secret);
    return { id: `key_${digest.toString('hex').slice(0, 12)}`, role: role as Role, tenant, sha256: digest };
  });
}

/** Compares hashes in constant time, over every entry, so timing tells nothing about which matched. */
export function findKey(entries: readonly ApiKeyEntry[], presented: string): ApiKeyEntry | undefined {
  const digest = sha256(presented);
  let found: ApiKeyEntry | undefined;
  for (const entry of entries) {
    if (timingSafeEqual(entry.sha256, digest) && !found) found = entry;
  }
  return found;
}
