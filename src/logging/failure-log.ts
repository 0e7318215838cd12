import { StoreUnavailableError } from '../store/event-store.port';

/** What a failure log writes to: Nest's Logger, or pino, or a test's list. */
export interface FailureLogSink {
  error(fields: Record<string, unknown>, message: string): void;
}

interface Seen {
  since: number;
  lastAt: number;
  count: number;
  nextAt: number;
  gapMs: number;
}

/**
 * A failure that repeats while a dependency is down (EventStoreDB not reachable: the projection
 * engine follows the log again every second, the rollback check every two) is written once per
 * kind, then again after 2, 4, 8 ... seconds, at most every 5 minutes, each time with how often it
 * failed since: an hour's outage writes about twenty lines, not thousands of stack traces. A store
 * that cannot be reached is an expected condition, so its line carries the reason and no stack; an
 * unexpected error keeps its stack the first time. A kind quiet for a minute starts afresh.
 */
export class FailureLog {
  private readonly kinds = new Map<string, Seen>();

  constructor(
    private readonly sink: FailureLogSink,
    private readonly now: () => number = Date.now,
    private readonly firstGapMs = 2_000,
    private readonly maxGapMs = 300_000,
    private readonly quietResetMs = 60_000,
  ) {}

  failed(error: unknown, message: string): void {
    const kind = kindOf(error);
    const at = this.now();
    const seen = this.kinds.get(kind);
    if (seen === undefined || at - seen.lastAt > this.quietResetMs) {
      this.kinds.set(kind, { since: at, lastAt: at, count: 1, nextAt: at + this.firstGapMs, gapMs: this.firstGapMs });
      this.sink.error(fieldsOf(error, true), message);
      return;
    }
    seen.count += 1;
    seen.lastAt = at;
    if (at < seen.nextAt) return;
    this.sink.error(
      { ...fieldsOf(error, false), failures: seen.count, since: new Date(seen.since).toISOString() },
      `${message} (still failing: ${seen.count} times since ${new Date(seen.since).toISOString()})`,
    );
    seen.gapMs = Math.min(seen.gapMs * 2, this.maxGapMs);
    seen.nextAt = at + seen.gapMs;
  }
}

function kindOf(error: unknown): string {
  if (!(error instanceof Error)) return typeof error;
  const code = (error as { code?: unknown }).code;
  return `${error.name}:${typeof code === 'string' || typeof code === 'number' ? code : ''}`;
}

/**
 * The fields a one-off failure is logged with: a store that cannot be reached is an expected
 * condition (EventStoreDB not started yet), so its reason and no stack; anything else whole.
 */
export function failureFields(error: unknown): Record<string, unknown> {
  return error instanceof StoreUnavailableError ? { store_unavailable: error.reason } : { err: error };
}

function fieldsOf(error: unknown, first: boolean): Record<string, unknown> {
  if (first || !(error instanceof Error) || error instanceof StoreUnavailableError) return failureFields(error);
  return { error: `${error.name}: ${error.message}` };
}
