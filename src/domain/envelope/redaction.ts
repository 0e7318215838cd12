/**
 * Secret redaction (SPEC §2): whatever a tool hands back is untrusted and may carry credentials.
 * Every string leaf is scanned before anything is stored; what was redacted is recorded (path and
 * kind, never the secret) so an auditor can see that a redaction happened.
 */
export interface Redaction {
  path: string;
  kind: SecretKind;
}

export type SecretKind =
  | 'private_key'
  | 'jwt'
  | 'bearer_token'
  | 'api_key'
  | 'aws_access_key'
  | 'github_token'
  | 'slack_token'
  | 'basic_auth_url'
  | 'card_number';

interface SecretPattern {
  kind: SecretKind;
  pattern: RegExp;
  /** Extra check on a match (Luhn for card numbers), to avoid redacting ordinary numbers. */
  accept?: (match: string) => boolean;
}

// Order matters: the widest shapes first, so a JWT inside "Bearer eyJ…" is reported as a bearer token.
const SECRET_PATTERNS: readonly SecretPattern[] = [
  { kind: 'private_key', pattern: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g },
  { kind: 'bearer_token', pattern: /\b(?:bearer|token)\s+[A-Za-z0-9\-._~+/]{8,}=*/gi },
  { kind: 'jwt', pattern: /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g },
  { kind: 'api_key', pattern: /\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}\b/g },
  { kind: 'api_key', pattern: /\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}/g },
  { kind: 'api_key', pattern: /\b(?:api[_-]?key|apikey|secret|password|passwd)\s*[:=]\s*["']?[^\s"',;]{6,}/gi },
  { kind: 'aws_access_key', pattern: /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g },
  { kind: 'github_token', pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b/g },
  { kind: 'slack_token', pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g },
  { kind: 'basic_auth_url', pattern: /\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]+:[^\s/@]+@/gi },
  { kind: 'card_number', pattern: /\b\d(?:[ -]?\d){12,18}\b/g, accept: (match) => passesLuhn(match.replace(/\D/g, '')) },
];

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

export function redactText(text: string): { text: string; kinds: SecretKind[] } {
  const kinds: SecretKind[] = [];
  let redacted = text;
  for (const { kind, pattern, accept } of SECRET_PATTERNS) {
    redacted = redacted.replace(pattern, (match) => {
      if (accept && !accept(match)) return match;
      kinds.push(kind);
      return `[REDACTED:${kind}]`;
    });
  }
  return { text: redacted, kinds };
}

/** Redacts every string leaf (and object key) of a JSON value; returns a new value. */
export function redactDeep<T>(value: T, path = ''): { value: T; redactions: Redaction[] } {
  const redactions: Redaction[] = [];
  const walk = (node: unknown, at: string): unknown => {
    if (typeof node === 'string') {
      const { text, kinds } = redactText(node);
      for (const kind of kinds) redactions.push({ path: at || '$', kind });
      return text;
    }
    if (Array.isArray(node)) return node.map((item, index) => walk(item, `${at}[${index}]`));
    if (node !== null && typeof node === 'object') {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(node)) {
        const { text: safeKey, kinds } = redactText(key);
        for (const kind of kinds) redactions.push({ path: `${at}.<key>`, kind });
        out[safeKey] = walk(item, at ? `${at}.${safeKey}` : safeKey);
      }
      return out;
    }
    return node;
  };
  return { value: walk(value, path) as T, redactions };
}
