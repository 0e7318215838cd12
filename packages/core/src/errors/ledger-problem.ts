import type { Directive } from '../domain/events';
import { ERROR_REGISTRY, type ErrorCode } from './error-registry';

export interface LedgerProblemExtras {
  /** The field at fault, as a dotted path (`events[0].data.envelope.retry.not_before`). */
  field?: string;
  directive?: Directive;
  state?: unknown;
  retryAfterSeconds?: number;
  /** Submit results, when a refusal answers a resubmission. */
  results?: unknown;
}

/** The one error type the application throws; the exception filter renders it as problem+json. */
export class LedgerProblem extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly extras: LedgerProblemExtras = {},
  ) {
    super(`${code}: ${detail}`);
    this.name = 'LedgerProblem';
    this.status = ERROR_REGISTRY[code].status;
  }
}
