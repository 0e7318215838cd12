import { Logger } from '@nestjs/common';
import type { LedgerActivityObserver } from '../observability/ledger-metrics';
import type { LedgerObserver } from './ledger.service';

/**
 * Other modules that must hear of refusals (webhooks count premature lookups, which the log does
 * not record) add a listener here; it runs before the refusal is answered.
 */
export type RefusalListener = NonNullable<LedgerObserver['onRefused']>;
export const REFUSAL_LISTENERS = Symbol('REFUSAL_LISTENERS');
/**
 * Other modules that act on a step as soon as it changes (the work feed hands a step just planned
 * out before the read model shows it) add a listener here; it runs after the append, before the
 * answer.
 */
export type AppendListener = NonNullable<LedgerObserver['onAppended']>;
export const APPEND_LISTENERS = Symbol('APPEND_LISTENERS');

const logger = new Logger('LedgerService');

/**
 * The ledger's observer: the metrics' hooks (its activity), then every listener another module added. A listener's
 * fault is logged and never changes the caller's answer.
 */
export function observerWithListeners(
  observer: LedgerActivityObserver,
  appendListeners: ReadonlySet<AppendListener>,
  refusalListeners: ReadonlySet<RefusalListener>,
): LedgerObserver {
  return {
    ...observer,
    onAppended: (events, tenant, step) => {
      observer.onAppended?.(events, tenant);
      for (const listener of appendListeners) {
        // The events are stored: a listener's fault must not turn their answer into a 500.
        try {
          listener(events, tenant, step);
        } catch (error) {
          logger.error({ err: error }, 'an append listener failed');
        }
      }
    },
    onRefused: (code, where) => {
      observer.onRefused?.(code, where);
      for (const listener of refusalListeners) {
        // A listener's fault must not turn the caller's refusal into a 500.
        try {
          listener(code, where);
        } catch (error) {
          logger.error({ err: error, code }, 'a refusal listener failed');
        }
      }
    },
  };
}
