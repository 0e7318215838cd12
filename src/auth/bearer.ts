/**
 * The key of `Authorization: Bearer <key>` (RFC 6750 §2.1; the scheme is case-insensitive), or
 * undefined when the header is missing, repeated or of another scheme.
 */
export function bearerToken(header: unknown): string | undefined {
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match ? match[1] : undefined;
}
