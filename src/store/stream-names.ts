/**
 * One stream per operation, scoped by tenant: `op-<tenant>:<operation_ref>`. The `op-` category
 * prefix lets a store filter the global log to the ledger's streams (EventStoreDB's `$all` also
 * carries system streams). Tenant ids cannot contain `:`, so the name splits unambiguously.
 */
export const OPERATION_STREAM_PREFIX = 'op-';
/**
 * Streams the adapters keep beside the log on EventStoreDB: the work feed's leases and the clock's
 * time base and heartbeats. They are not facts and carry none of the ledger's metadata, so a read
 * of the whole log passes over them like system streams.
 */
export const BESIDE_THE_LOG_PREFIXES: readonly string[] = ['lease-', 'ledger-clock-'];
export const TENANT_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export function operationStream(tenant: string, operationRef: string): string {
  return `${OPERATION_STREAM_PREFIX}${tenant}:${operationRef}`;
}

export function parseOperationStream(stream: string): { tenant: string; operationRef: string } | undefined {
  if (!stream.startsWith(OPERATION_STREAM_PREFIX)) return undefined;
  const rest = stream.slice(OPERATION_STREAM_PREFIX.length);
  const colon = rest.indexOf(':');
  if (colon <= 0) return undefined;
  return { tenant: rest.slice(0, colon), operationRef: rest.slice(colon + 1) };
}
