import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP } from 'node:net';

/**
 * Where a webhook may not go unless LEDGER_WEBHOOK_ALLOW_PRIVATE=1 (docs/webhooks.md, "Where a
 * receiver may be"): the service's own machine and the networks behind it. A subscription to such an
 * address would let an admin key reach internal services from the service's network position, and
 * its delivery status would say which internal ports answer.
 */
const PRIVATE_V4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network"; 0.0.0.0 reaches the local machine
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // shared address space (carrier NAT; Alibaba's metadata 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

function v4ToInt(address: string): number {
  return address.split('.').reduce((value, part) => value * 256 + Number(part), 0);
}

function privateV4(address: string): boolean {
  const value = v4ToInt(address);
  return PRIVATE_V4.some(
    ([base, bits]) => Math.floor(value / 2 ** (32 - bits)) === Math.floor(v4ToInt(base) / 2 ** (32 - bits)),
  );
}

/** The eight 16-bit groups of an IPv6 address (an embedded dotted IPv4 tail included). */
function v6Groups(address: string): number[] {
  let text = address.toLowerCase().split('%')[0];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const value = v4ToInt(dotted[1]);
    text = `${text.slice(0, -dotted[1].length)}${(value >>> 16).toString(16)}:${(value & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? [] : new Array<string>(8 - headGroups.length - tailGroups.length).fill('0');
  return [...headGroups, ...zeros, ...tailGroups].map((group) => parseInt(group, 16));
}

function privateV6(address: string): boolean {
  const g = v6Groups(address);
  const embeddedV4 = (high: number, low: number) => `${high >>> 8}.${high & 0xff}.${low >>> 8}.${low & 0xff}`;
  if (g.slice(0, 7).every((group) => group === 0) && g[7] <= 1) return true; // :: and ::1
  if (g.slice(0, 5).every((group) => group === 0) && g[5] === 0xffff) return privateV4(embeddedV4(g[6], g[7])); // ::ffff:a.b.c.d
  if (g.slice(0, 6).every((group) => group === 0)) return privateV4(embeddedV4(g[6], g[7])); // ::a.b.c.d (deprecated)
  if (g[0] === 0x64 && g[1] === 0xff9b) return privateV4(embeddedV4(g[6], g[7])); // NAT64
  if (g[0] === 0x2002) return privateV4(embeddedV4(g[1], g[2])); // 6to4
  if ((g[0] & 0xfe00) === 0xfc00) return true; // unique local fc00::/7 (AWS metadata fd00:ec2::254)
  if ((g[0] & 0xffc0) === 0xfe80 || (g[0] & 0xffc0) === 0xfec0) return true; // link-local, old site-local
  return (g[0] & 0xff00) === 0xff00; // multicast
}

/** Whether an IP address (v4 or v6, without brackets) is loopback, link-local, private or reserved. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address.split('%')[0]);
  if (family === 4) return privateV4(address);
  if (family === 6) return privateV6(address);
  return false;
}

/**
 * Whether a URL's host is private without asking DNS: an address literal in a private range, or a
 * name that always means this machine (RFC 6761 `localhost`). Other names are checked when they are
 * resolved, at each delivery.
 */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
  if (isIP(host)) return isPrivateAddress(host);
  return host === 'localhost' || host.endsWith('.localhost');
}

export class PrivateAddressError extends Error {
  readonly code = 'WEBHOOK_PRIVATE_ADDRESS';
  constructor(host: string, address: string) {
    super(
      `${host} resolves to ${address}, a loopback, link-local or private address (LEDGER_WEBHOOK_ALLOW_PRIVATE=1 allows it)`,
    );
    this.name = 'PrivateAddressError';
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.request that refuses a name resolving to any private address. The connection
 * is made to the address checked here (no second resolution a rebinding DNS server could answer
 * differently).
 */
export function publicOnlyLookup(
  hostname: string,
  options: { family?: number | string; hints?: number; all?: boolean },
  callback: LookupCallback,
): void {
  const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0);
  const query: LookupAllOptions = {
    all: true,
    family,
    ...(options.hints === undefined ? {} : { hints: options.hints }),
  };
  dnsLookup(hostname, query, (error, addresses) => {
    if (error) return callback(error, []);
    const refused = addresses.find((entry) => isPrivateAddress(entry.address));
    if (refused) return callback(new PrivateAddressError(hostname, refused.address), []);
    if (options.all) return callback(null, addresses);
    return callback(null, addresses[0].address, addresses[0].family);
  });
}
