/**
 * What the load clients write, one JSON object per line, and the checker reads back. Every line is
 * written with a synchronous append before the client goes on, so a record exists for every
 * answer the client acted on, whatever happens to the service afterwards.
 */

/** A 200 answer to a submit: the ledger acknowledged the fact. */
export interface AckRecord {
  kind: 'ack';
  client: number;
  ref: string;
  event_id: string;
  type: string;
  status: 'appended' | 'duplicate';
  /** The stream revision the answer reported. */
  revision: number;
  position: number;
  state_status: string;
  replayed: boolean;
  /** Sends of this same event id it took (1: the first send was answered). */
  sends: number;
}

/** A 409 answer: the ledger refused the fact (a refused dispatch is itself recorded, docs/contract.md §3). */
export interface RefusalRecord {
  kind: 'refusal';
  client: number;
  ref: string;
  event_id: string;
  type: string;
  code: string;
  /** The revision of the state the problem answer carried, when it carried one. */
  revision?: number;
  sends: number;
}

/** The simulated provider performed the write of an attempt (its side effect happened). */
export interface ToolWriteRecord {
  kind: 'tool_write';
  client: number;
  ref: string;
  attempt: number;
}

/** A request the client gave up on, or an answer it did not expect: evidence, never ignored. */
export interface AnomalyRecord {
  kind: 'anomaly';
  client: number;
  ref: string;
  what: string;
  detail: string;
  status?: number;
}

export type LoadRecord = AckRecord | RefusalRecord | ToolWriteRecord | AnomalyRecord;

export interface ClientConfig {
  client: number;
  seed: number;
  /** The service processes; a fact not answered by one is sent again, same id, to the next. */
  baseUrls: string[];
  recordFile: string;
  /** Operations driven at the same time by one client process. */
  workers: number;
  /** Prefix of this campaign's run ids, so two campaigns on one data dir never share a ref. */
  runTag: string;
}

export interface ClientStats {
  client: number;
  operations: number;
  requests: number;
  resends: number;
  gaveUp: number;
}

export type ParentMessage = { type: 'stop' };
export type ChildMessage = { type: 'ready' } | { type: 'done'; stats: ClientStats };
