/**
 * Local mode's answer to DNS rebinding (docs/security.md, "Local mode"). A page whose name an
 * attacker rebinds to 127.0.0.1 reaches the loopback port, but the browser still sends the page's
 * own name in `Host`; so without keys only loopback names and addresses are answered:
 * `localhost` and names under it (RFC 6761 §6.3: they resolve to loopback and browsers never ask
 * DNS for them, so no page elsewhere can be served under one), `127.0.0.0/8`, and `[::1]`, each
 * with any port or none. Anything else, a missing Host included, is 421 MISDIRECTED_REQUEST
 * (RFC 9110 §15.5.20: this server does not answer for that name).
 */
const HOST = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/;
const LOCALHOST_NAME = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*localhost$/;
const LOOPBACK_V4 = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

export function isLoopbackHost(header: unknown): boolean {
  if (typeof header !== 'string') return false;
  const match = HOST.exec(header);
  if (!match) return false;
  const [, v6, rawName, port] = match;
  if (port !== undefined && Number(port) > 65_535) return false;
  if (v6 !== undefined) return v6 === '::1';
  // One trailing dot is the same name, fully qualified.
  const name = rawName.toLowerCase().replace(/\.$/, '');
  if (LOCALHOST_NAME.test(name)) return true;
  const v4 = LOOPBACK_V4.exec(name);
  return v4 !== null && v4.slice(1).every((octet) => Number(octet) <= 255);
}
