/**
 * The shape every projection has (docs/contract.md §5): a pure fold over the global log, run by the engine in
 * src/projection-engine. Nothing here may do I/O, read a clock or import a framework: the same
 * events always give the same documents, which is what makes a rebuild equal to a live run.
 */

/** The part of a stored event a projection reads; the port's StoredEvent is assignable to it. */
export interface ProjectedEvent {
  stream: string;
  /** 0-based revision within the stream. */
  revision: number;
  /** Global log position: strictly increasing, possibly with gaps. */
  position: number;
  event_id: string;
  type: string;
  data: unknown;
  metadata: {
    recorded_at: string;
    actor: string;
    tenant: string;
    operation_ref: string;
    causation_event_id?: string;
    /** A fact a worker submitted under a work-feed lease: which worker, and whose lease it took over. */
    lease?: LeaseEvidence;
  };
}

export interface LeaseEvidence {
  lease_id: string;
  /** The worker the lease was granted to (`unknown` for a lease id the ledger no longer knows). */
  holder: string;
  /** False when the lease had already been taken over or released when the fact arrived. */
  current: boolean;
  /** The worker whose expired lease this one took over. */
  took_over_from?: string;
}

export type IndexValue = string | number | null;
export type ColumnType = 'text' | 'integer';

export interface Projection<Doc> {
  /** Lower snake_case: it names the projection's tables in the read model. */
  readonly name: string;
  /** Bump when `evolve` changes what it produces: the engine then rebuilds from zero. */
  readonly version: number;
  /**
   * Optional: names the document every later event of this event's stream belongs to. Used where
   * only the first event of an operation (StepPlanned) carries the grouping key (run, tool); the
   * engine remembers the link per stream, in the same transaction as the documents.
   */
  linkOf?(event: ProjectedEvent): string | undefined;
  /** The document this event changes, or undefined to skip it. `link` is the stream's link, if any. */
  keyOf(event: ProjectedEvent, link: string | undefined): string | undefined;
  /** Total and pure. Must return `doc` unchanged for an event it has already applied. */
  evolve(doc: Doc | undefined, event: ProjectedEvent): Doc;
  /**
   * Optional and pure: what depends on the whole document rather than on one event (the evidence
   * trail's verdict), derived when the document is stored instead of after every event it folds.
   * `seal(seal(doc))` equals `seal(doc)`.
   */
  seal?(doc: Doc): Doc;
  /** Columns the engine stores beside the document, for filtering and ordering queries. */
  readonly columns?: Readonly<Record<string, ColumnType>>;
  /** Composite indexes over `columns`, most selective first. */
  readonly indexes?: readonly (readonly string[])[];
  index?(doc: Doc): Record<string, IndexValue>;
}

// `any` here only erases the document type so projections of different documents share a list.
export type AnyProjection = Projection<any>;

/** Every document remembers the last position it applied, so a redelivered event changes nothing. */
export interface PositionedDoc {
  position: number;
}

export function alreadyApplied(doc: PositionedDoc | undefined, event: ProjectedEvent): boolean {
  return doc !== undefined && event.position <= doc.position;
}

/**
 * Event data as text, for keys and summaries. Data is whatever the writer put there (a newer
 * ledger, a damaged import): this never throws, where String() and template literals throw on an
 * object that cannot be converted (`{ toString: 0 }`), and a fold that throws stops the engine.
 */
export function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' || value == null)
    return String(value);
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}

/** Tenants cannot contain ':' (src/store/stream-names.ts), so `tenant:rest` splits unambiguously. */
export function scopedKey(tenant: string, id: string): string {
  return `${tenant}:${id}`;
}

/** Milliseconds since the epoch of an ISO instant; 0 when it cannot be read (evolve never throws). */
export function instantMs(iso: unknown): number {
  if (typeof iso !== 'string') return 0;
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? ms : 0;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function stringField(data: unknown, field: string): string | undefined {
  if (!isRecord(data)) return undefined;
  const value = data[field];
  return typeof value === 'string' ? value : undefined;
}

export function numberField(data: unknown, field: string): number | undefined {
  if (!isRecord(data)) return undefined;
  const value = data[field];
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}
