/**
 * Secret redaction (docs/contract.md §2): whatever a tool hands back is untrusted and may carry
 * credentials. Every string leaf, every object key and every number that could be a card is
 * scanned before anything is stored; what was redacted is recorded (path and kind, never the
 * secret) so an auditor can see that a redaction happened.
 *
 * Three layers, each catching what the others cannot:
 * - a detector passed in by the caller (the service runs secretlint's recommended preset: shapes
 *   its maintainers keep up with, e.g. Slack webhooks, SendGrid, GCP, npm, Shopify, 1Password);
 * - the shapes below, known here and checked synchronously (bearer and basic credentials, JWTs,
 *   private key blocks, provider key prefixes, credentials in URLs, card numbers by Luhn);
 * - key names: a value under `password`, `client_secret`, `api_key`, `authorization`, … is a secret
 *   whatever it looks like, as a JSON key and in `key=value` / `key: value` text.
 * What no layer can see: a secret with no recognisable shape and no key name beside it (a random
 * password written into a sentence). docs/security.md says so.
 */
export interface Redaction {
  path: string;
  kind: SecretKind;
}

export type SecretKind =
  | 'private_key'
  | 'jwt'
  | 'bearer_token'
  | 'basic_auth'
  | 'api_key'
  | 'aws_access_key'
  | 'github_token'
  | 'slack_token'
  | 'slack_webhook'
  | 'google_api_key'
  | 'sendgrid_key'
  | 'basic_auth_url'
  | 'named_secret'
  | 'card_number'
  /** Found by the injected detector; the suffix names its rule (`detected_slack`). */
  | `detected_${string}`;

/** A secret a detector found in a text: the half-open range [start, end) and what it is. */
export interface DetectedSecret {
  start: number;
  end: number;
  kind: SecretKind;
}

/** Synchronous on purpose: the domain does no I/O; an asynchronous scanner runs first and answers from what it found. */
export type SecretDetector = (text: string) => readonly DetectedSecret[];

export interface RedactionOptions {
  detect?: SecretDetector;
}

interface SecretPattern {
  kind: SecretKind;
  pattern: RegExp;
  /** Extra check on a match (Luhn and a card network for card numbers), to avoid redacting ordinary text. */
  accept?: (match: string) => boolean;
}

/** Key names whose value is a secret whatever it looks like (compared lower-case, without separators). */
const SECRET_NAME_ANYWHERE =
  /(password|passwd|passphrase|secret|apikey|privatekey|accesskey|authorization|credential|cookie)/;
const SECRET_NAME_SUFFIX = /(token|pwd|auth|sessionid|cvv|cvc)$/;

export function isSecretKeyName(key: string): boolean {
  const normalised = key.toLowerCase().replace(/[^a-z0-9]/g, '');
  return SECRET_NAME_ANYWHERE.test(normalised) || SECRET_NAME_SUFFIX.test(normalised);
}

/**
 * The same names inside text: `DB_PASSWORD=…`, `"client_secret": "…"`, `aws_secret_access_key = …`.
 * Any word followed by `=`, `:` or `=>` is a candidate, and its name decides: one pass over the
 * text (a pattern with the names inside it backtracked over every prefix of every word).
 */
const ASSIGNMENT =
  /(?<![A-Za-z0-9_.-])(["']?)([A-Za-z0-9_.-]{1,64})\1\s*(?:=>|=|:)\s*["']?(?!\[REDACTED)(?=[^\s"',;&)}\]]{3})/g;
const ASSIGNED_VALUE = /[^\s"',;&)}\]]+/y;

/** Redacts the value of every `name=value` whose name is a secret's; the name stays (`DB_PASSWORD=[REDACTED:named_secret]`). */
function redactAssignments(text: string, kinds: SecretKind[]): string {
  let out = '';
  let from = 0;
  for (const match of text.matchAll(ASSIGNMENT)) {
    const valueStart = (match.index as number) + match[0].length;
    if (valueStart < from || !isSecretKeyName(match[2])) continue;
    ASSIGNED_VALUE.lastIndex = valueStart;
    const value = ASSIGNED_VALUE.exec(text);
    if (!value) continue;
    kinds.push('named_secret');
    out += `${text.slice(from, valueStart)}${marker('named_secret')}`;
    from = valueStart + value[0].length;
  }
  return from === 0 ? text : out + text.slice(from);
}

// Order matters: the widest shapes first, so a JWT inside "Bearer eyJ…" is reported as a bearer
// token, and a credential after `Authorization:` is redacted by its scheme before its key name.
const SECRET_PATTERNS: readonly SecretPattern[] = [
  {
    kind: 'private_key',
    pattern:
      /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)/g,
  },
  { kind: 'bearer_token', pattern: /\b(?:bearer|token)\s+(?!\[REDACTED)[A-Za-z0-9\-._~+/]{8,}=*/gi },
  { kind: 'basic_auth', pattern: /\bbasic\s+[A-Za-z0-9+/]{6,}={0,2}/gi, accept: isBasicCredential },
  { kind: 'jwt', pattern: /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g },
  { kind: 'slack_webhook', pattern: /https:\/\/hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9/_-]+/g },
  { kind: 'google_api_key', pattern: /\bAIza[0-9A-Za-z_-]{35}/g },
  { kind: 'sendgrid_key', pattern: /\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}/g },
  { kind: 'api_key', pattern: /\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}/g },
  { kind: 'api_key', pattern: /\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}/g },
  // Tailscale keys: secretlint 12, the last release whose engines include Node 20, has no rule for them.
  { kind: 'api_key', pattern: /\btskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}/g },
  { kind: 'aws_access_key', pattern: /\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b/g },
  { kind: 'github_token', pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b/g },
  { kind: 'slack_token', pattern: /\bx(?:ox[abposre]|app)-[A-Za-z0-9-]{10,}/g },
  { kind: 'basic_auth_url', pattern: /\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]+:[^\s/@]+@/gi },
  {
    kind: 'card_number',
    pattern: /\b\d(?:[ -]?\d){12,18}\b/g,
    accept: (match) => isCardNumber(match.replace(/\D/g, '')),
  },
];

/** `Basic <base64 of user:password>` (RFC 7617); "basic authentication" is not one. */
function isBasicCredential(match: string): boolean {
  const encoded = match.replace(/^basic\s+/i, '');
  try {
    return atob(encoded).includes(':');
  } catch {
    return false;
  }
}

export function passesLuhn(digits: string): boolean {
  if (digits.length < 13 || digits.length > 19) return false;
  let sum = 0;
  for (let index = 0; index < digits.length; index++) {
    let digit = digits.charCodeAt(digits.length - 1 - index) - 48;
    if (index % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

/**
 * A card number: Luhn, and the length and leading digits of a card network (Visa, Mastercard, Amex,
 * Discover, JCB, Diners, UnionPay, Maestro). The prefix check keeps a Luhn-valid millisecond
 * timestamp (13 digits starting 17…) or an order number from being taken for a card.
 */
export function isCardNumber(digits: string): boolean {
  if (!passesLuhn(digits)) return false;
  const length = digits.length;
  const prefix = (size: number) => Number(digits.slice(0, size));
  if (digits[0] === '4') return length === 13 || length === 16 || length === 19;
  if ((prefix(2) >= 51 && prefix(2) <= 55) || (prefix(4) >= 2221 && prefix(4) <= 2720)) return length === 16;
  if (prefix(2) === 34 || prefix(2) === 37) return length === 15;
  if (prefix(4) === 6011 || prefix(2) === 65 || (prefix(3) >= 644 && prefix(3) <= 649)) return length >= 16;
  if (prefix(4) >= 3528 && prefix(4) <= 3589) return length >= 16;
  if (prefix(2) === 36 || prefix(2) === 38 || (prefix(3) >= 300 && prefix(3) <= 305)) return length >= 14;
  if (prefix(2) === 62) return length >= 16;
  if (['50', '56', '57', '58', '63', '67'].includes(digits.slice(0, 2))) return length >= 12;
  return false;
}

const marker = (kind: SecretKind) => `[REDACTED:${kind}]`;

/** Replaces the detector's ranges (merged where they overlap), right to left so offsets hold. */
function applyDetected(text: string, found: readonly DetectedSecret[], kinds: SecretKind[]): string {
  if (found.length === 0) return text;
  const ranges = [...found].filter((range) => range.end > range.start).sort((a, b) => a.start - b.start);
  const merged: DetectedSecret[] = [];
  for (const range of ranges) {
    const last = merged[merged.length - 1];
    if (last && range.start < last.end) last.end = Math.max(last.end, range.end);
    else merged.push({ ...range });
  }
  let out = text;
  for (let index = merged.length - 1; index >= 0; index--) {
    const { start, end, kind } = merged[index];
    kinds.push(kind);
    out = `${out.slice(0, start)}${marker(kind)}${out.slice(end)}`;
  }
  return out;
}

export function redactText(text: string, options: RedactionOptions = {}): { text: string; kinds: SecretKind[] } {
  const kinds: SecretKind[] = [];
  let redacted = options.detect ? applyDetected(text, options.detect(text), kinds) : text;
  for (const [index, { kind, pattern, accept }] of SECRET_PATTERNS.entries()) {
    // Names after the shapes (a credential after `Authorization:` is redacted by its scheme), cards last.
    if (index === SECRET_PATTERNS.length - 1) redacted = redactAssignments(redacted, kinds);
    redacted = redacted.replace(pattern, (match: string) => {
      if (accept && !accept(match)) return match;
      kinds.push(kind);
      return marker(kind);
    });
  }
  return { text: redacted, kinds };
}

/** Whether a text holds anything any layer would redact (used to refuse identifiers). */
export function containsSecret(text: string, options: RedactionOptions = {}): boolean {
  return redactText(text, options).kinds.length > 0;
}

/**
 * Redacts every string leaf, object key and card-like number of a JSON value; returns a new value.
 * A value under a secret key name is replaced whole, whatever its type.
 */
export function redactDeep<T>(
  value: T,
  path = '',
  options: RedactionOptions = {},
): { value: T; redactions: Redaction[] } {
  const redactions: Redaction[] = [];
  const walk = (node: unknown, at: string): unknown => {
    if (typeof node === 'string') {
      const { text, kinds } = redactText(node, options);
      for (const kind of kinds) redactions.push({ path: at || '$', kind });
      return text;
    }
    if (typeof node === 'number') {
      // A card sent as a JSON number is a card all the same.
      if (Number.isSafeInteger(node) && node > 0 && isCardNumber(String(node))) {
        redactions.push({ path: at || '$', kind: 'card_number' });
        return marker('card_number');
      }
      return node;
    }
    if (Array.isArray(node)) return node.map((item, index) => walk(item, `${at}[${index}]`));
    if (node !== null && typeof node === 'object') {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(node)) {
        const { text: safeKey, kinds } = redactText(key, options);
        for (const kind of kinds) redactions.push({ path: `${at}.<key>`, kind });
        const itemPath = at ? `${at}.${safeKey}` : safeKey;
        if (isSecretKeyName(key) && item !== null && typeof item !== 'boolean' && item !== '') {
          redactions.push({ path: itemPath, kind: 'named_secret' });
          out[safeKey] = marker('named_secret');
          continue;
        }
        out[safeKey] = walk(item, itemPath);
      }
      return out;
    }
    return node;
  };
  return { value: walk(value, path) as T, redactions };
}
