import { SUBMITTED_FACTS } from '@recovery-ledger/core';

/**
 * Which notifications the log calls for: pure functions of an event, so the consumer that runs
 * them can replay a batch after a crash and reach the same rows (keyed by the causing event, so a
 * replay inserts nothing twice).
 */
export const NOTIFICATION_KINDS = [
  'step.escalated',
  'approval.requested',
  'unknown_outcome.unresolved',
  'verification.premature_repeated',
  'operation.possible_duplicate',
  'operation.verified_manually',
  'operation.cancelled',
  'operation.reopened',
  'escalation.acknowledged',
] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

export interface LogEventView {
  type: string;
  event_id: string;
  position: number;
  data: unknown;
  metadata: { tenant: string; operation_ref: string; recorded_at: string; causation_event_id?: string };
}

export type LogReaction =
  /** Notify now, once per subscription: keyed by the transition that caused it. */
  | {
      do: 'notify';
      kind: Exclude<NotificationKind, 'unknown_outcome.unresolved' | 'verification.premature_repeated'>;
      key: string;
    }
  /** The step began waiting on a lookup: notify if it still waits when the subscription's time is up. */
  | { do: 'watch_unknown'; transition_event_id: string; since: string }
  /** The step moved: repeated premature lookups count again from zero. */
  | { do: 'reset_premature' };

function transitionTo(event: LogEventView): string | undefined {
  if (event.type !== 'TransitionRecorded' || typeof event.data !== 'object' || event.data === null) return undefined;
  const to = (event.data as { to?: unknown }).to;
  return typeof to === 'string' ? to : undefined;
}

/** A late outcome that may have reached the provider after a later attempt was granted (docs/contract.md §4.9). */
function isPossibleDuplicate(event: LogEventView): boolean {
  return (
    event.type === 'LateOutcomeRecorded' &&
    (event.data as { possible_duplicate?: unknown } | null)?.possible_duplicate === true
  );
}

type NotifyKind = Extract<LogReaction, { do: 'notify' }>['kind'];

/**
 * What a fact notifies by itself, from its one definition (packages/core/src/facts/submitted-facts.ts):
 * what a person did (docs/contract.md §4.10). A kind named there that is none of ours does not compile.
 */
const FACT_NOTIFICATIONS: ReadonlyMap<string, NotifyKind> = new Map(
  Object.entries(SUBMITTED_FACTS).flatMap(([type, fact]): Array<[string, NotifyKind]> => {
    const kind: NotifyKind | null = fact.notifies;
    return kind === null ? [] : [[type, kind]];
  }),
);

export function reactionsTo(event: LogEventView): LogReaction[] {
  const factKind = FACT_NOTIFICATIONS.get(event.type);
  if (factKind !== undefined) return [{ do: 'notify', kind: factKind, key: event.event_id }];
  if (isPossibleDuplicate(event)) return [{ do: 'notify', kind: 'operation.possible_duplicate', key: event.event_id }];
  const to = transitionTo(event);
  if (to === undefined) return [];
  const reactions: LogReaction[] = [{ do: 'reset_premature' }];
  if (to === 'escalated') reactions.push({ do: 'notify', kind: 'step.escalated', key: event.event_id });
  if (to === 'awaiting_approval') reactions.push({ do: 'notify', kind: 'approval.requested', key: event.event_id });
  if (to === 'verifying')
    reactions.push({ do: 'watch_unknown', transition_event_id: event.event_id, since: event.metadata.recorded_at });
  return reactions;
}

/** Backoff before attempt `attempt + 1` (attempt counts from 1): doubling from `baseMs`, capped. */
export function retryDelayMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
}
