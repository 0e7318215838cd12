export type Role = 'runtime' | 'auditor' | 'admin' | 'approver' | 'operator' | 'metrics';

/** Who is calling: resolved once per request by the auth guard, read by handlers. */
export interface Caller {
  tenant: string;
  /** The key's id (never the key itself), recorded as the actor of each event. */
  actor: string;
  role: Role;
  /** Local mode's one caller (no keys configured, loopback only). */
  local?: true;
}

/** Where the auth guard leaves the caller on the request it let through. */
export interface RequestWithCaller {
  caller?: Caller;
}
