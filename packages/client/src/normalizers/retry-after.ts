/**
 * Retry-After (RFC 9110 §10.2.3) is either delay-seconds (1*DIGIT) or an HTTP-date. Answers the
 * wait in milliseconds from `now`, never negative; undefined when the header is absent or is
 * neither form (a malformed header is ignored rather than guessed at).
 */
export function retryAfterMs(value: string | null | undefined, now: Date): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds) ? seconds * 1000 : undefined;
  }
  // An HTTP-date names its zone (IMF-fixdate and the obsolete forms all say GMT); anything else
  // would be read in the local zone by Date.parse, which is not what the sender meant.
  if (!/\bGMT\b/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}

/** Reads one header from either a fetch `Headers` or a plain (node:http style) header record. */
export function headerValue(
  headers: Headers | Record<string, string | string[] | number | undefined> | undefined,
  name: string,
): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    return Array.isArray(value) ? value[0] : String(value);
  }
  return undefined;
}
