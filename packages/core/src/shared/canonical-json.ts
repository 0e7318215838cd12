/**
 * Canonical JSON: object keys sorted, no whitespace, `undefined` members dropped, as JSON.stringify
 * would. Two equal values always give the same bytes, so hashes over it are stable across
 * processes, adapters and an export/import round trip.
 *
 * It runs for every event the ledger seals or verifies, so it is written for speed: one string
 * built by concatenation, keys sorted only when they are not already in order (the same UTF-16
 * code-unit order `sort()` gives), and the quoted form of the few keys every event repeats kept.
 */
export function canonicalJson(value: unknown): string {
  switch (typeof value) {
    case 'string':
    case 'number':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      return Array.isArray(value) ? canonicalArray(value) : canonicalObject(value as Record<string, unknown>);
    default: {
      const text = JSON.stringify(value);
      return text === undefined ? 'null' : text;
    }
  }
}

function canonicalArray(items: unknown[]): string {
  let out = '[';
  for (let index = 0; index < items.length; index++) {
    if (index > 0) out += ',';
    out += canonicalJson(items[index]);
  }
  return `${out}]`;
}

function canonicalObject(value: Record<string, unknown>): string {
  const keys = Object.keys(value);
  for (let index = 1; index < keys.length; index++) {
    if (keys[index - 1] > keys[index]) {
      keys.sort();
      break;
    }
  }
  let out = '{';
  let first = true;
  for (const key of keys) {
    const member = value[key];
    if (member === undefined || typeof member === 'function') continue;
    if (!first) out += ',';
    first = false;
    out += `${quotedKey(key)}:${canonicalJson(member)}`;
  }
  return `${out}}`;
}

/** Bounded: keys come from callers too, and only short ones recur. */
const QUOTED_KEYS = new Map<string, string>();
const MAX_QUOTED_KEYS = 4096;

function quotedKey(key: string): string {
  let quoted = QUOTED_KEYS.get(key);
  if (quoted === undefined) {
    quoted = JSON.stringify(key);
    if (key.length <= 64 && QUOTED_KEYS.size < MAX_QUOTED_KEYS) QUOTED_KEYS.set(key, quoted);
  }
  return quoted;
}
