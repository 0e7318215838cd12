/**
 * Where the Idempotency-Key header's answers are kept (src/http/idempotency-keys.ts): one row per
 * scope (a hash of the tenant, the API key and the client's key), with the request's fingerprint
 * and the first 2xx answer, until it expires. A SQLite file beside an instance's data, or a table
 * of the PostgreSQL database that every instance shares, so a retry sent to another instance
 * behind the load balancer is answered the same. Every adapter passes
 * test/contract/idempotency-keys.contract.ts.
 */
export interface KeptAnswer {
  fingerprint: string;
  /** The answer as JSON text. */
  body: string;
}

export interface IdempotencyKeyStore {
  /** The answer kept under `scope`, when it has not expired at `nowMs`. */
  kept(scope: string, nowMs: number): Promise<KeptAnswer | undefined>;
  /** Keeps an answer (replacing an expired one) until `expiresMs`. */
  keep(scope: string, answer: KeptAnswer, expiresMs: number): Promise<void>;
  /** Forgets every answer expired at `nowMs`. */
  expire(nowMs: number): Promise<void>;
  close(): Promise<void>;
}
