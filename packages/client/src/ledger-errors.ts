import type { ErrorCode } from '@recovery-ledger/core';
import type { Directive, OperationState, ProblemDetails, SubmitResult } from './ledger-api.types';

/** Codes of failures the client sees before any problem+json comes back. */
export type ClientErrorCode =
  /** No answer: the ledger could not be reached, or the connection broke, after every retry. */
  | 'LEDGER_UNREACHABLE'
  /** No answer within the per-request timeout, after every retry. */
  | 'LEDGER_TIMEOUT'
  /** An answer that is not the documented shape (a proxy's HTML page, a truncated body). */
  | 'LEDGER_BAD_RESPONSE';

/** A registry code, a client code, or a code a newer ledger added (kept, not guessed at). */
export type LedgerErrorCode = ErrorCode | ClientErrorCode | (string & {});

export interface LedgerErrorInit {
  code: LedgerErrorCode;
  status: number;
  detail: string;
  title?: string;
  type?: string;
  field?: string;
  directive?: Directive;
  state?: OperationState;
  results?: SubmitResult[];
  retryAfterSeconds?: number;
  cause?: unknown;
}

/**
 * The mark every LedgerError carries, the same in every copy of the client: an application that
 * imports the ES-module build and an integration that requires the CommonJS one (or two installed
 * versions) each hold their own classes, so `instanceof` checks the mark and the kind, never the
 * class's identity.
 */
const BRAND = Symbol.for('@recovery-ledger/client.LedgerError');

/** Every error the client throws: the stable code first, the human detail second. */
export class LedgerError extends Error {
  /** The class's name as the mark reads it (set per class: a bundler may rename classes). */
  static readonly kind: string = 'LedgerError';

  static override [Symbol.hasInstance](value: unknown): boolean {
    if (typeof value !== 'object' || value === null) return false;
    const kinds = (value as { [BRAND]?: unknown })[BRAND];
    if (!Array.isArray(kinds)) return Function.prototype[Symbol.hasInstance].call(this, value);
    return kinds.includes((this as unknown as { kind: string }).kind);
  }

  readonly code: LedgerErrorCode;
  /** The HTTP status; 0 when no answer came back. */
  readonly status: number;
  readonly detail: string;
  readonly title?: string;
  readonly type?: string;
  /** The field at fault, as a dotted path (`events[0].data.envelope.retry.not_before`). */
  readonly field?: string;
  /** What the runtime may do next, when the ledger said so. */
  readonly directive?: Directive;
  readonly state?: OperationState;
  readonly results?: SubmitResult[];
  readonly retryAfterSeconds?: number;

  constructor(init: LedgerErrorInit) {
    super(`${init.code}: ${init.detail}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.detail = init.detail;
    this.title = init.title;
    this.type = init.type;
    this.field = init.field;
    this.directive = init.directive;
    this.state = init.state;
    this.results = init.results;
    this.retryAfterSeconds = init.retryAfterSeconds;
    const kinds = [...new Set(['LedgerError', (new.target as unknown as { kind: string }).kind])];
    Object.defineProperty(this, BRAND, { value: kinds, enumerable: false });
  }
}

/** A 409: an invariant refused the fact. For a dispatch, the runtime must not call the tool. */
export class LedgerRefusal extends LedgerError {
  static override readonly kind: string = 'LedgerRefusal';
}

/** A 400 / 413 / 415 / 422: the request itself is wrong; resending it unchanged cannot help. */
export class LedgerInvalidRequest extends LedgerError {
  static override readonly kind: string = 'LedgerInvalidRequest';
}

/** A 401 / 403: the key is missing or unknown, or its role or tenant does not allow this. */
export class LedgerAuthError extends LedgerError {
  static override readonly kind: string = 'LedgerAuthError';
}

/** A 404: no such operation, run or route. */
export class LedgerNotFound extends LedgerError {
  static override readonly kind: string = 'LedgerNotFound';
}

/** A 429 / 5xx or no answer: the ledger could not take the request now. */
export class LedgerUnavailable extends LedgerError {
  static override readonly kind: string = 'LedgerUnavailable';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function classFor(status: number): new (init: LedgerErrorInit) => LedgerError {
  if (status === 409) return LedgerRefusal;
  if (status === 401 || status === 403) return LedgerAuthError;
  if (status === 404) return LedgerNotFound;
  if (status === 429 || status >= 500 || status === 0) return LedgerUnavailable;
  if (status >= 400) return LedgerInvalidRequest;
  return LedgerError;
}

/**
 * The typed error for an error answer. A body that is not the ledger's problem+json (a proxy in
 * between) gives LEDGER_BAD_RESPONSE with the status, and none of the body's text.
 */
export function ledgerErrorFromAnswer(status: number, body: unknown, retryAfterSeconds?: number): LedgerError {
  const ErrorClass = classFor(status);
  if (!isRecord(body) || typeof body.code !== 'string') {
    return new ErrorClass({
      code: 'LEDGER_BAD_RESPONSE',
      status,
      detail: `the ledger answered ${status} without a problem body`,
      retryAfterSeconds,
    });
  }
  const problem = body as unknown as Partial<ProblemDetails>;
  return new ErrorClass({
    code: problem.code as string,
    status,
    detail: typeof problem.detail === 'string' ? problem.detail : String(problem.title ?? problem.code),
    title: typeof problem.title === 'string' ? problem.title : undefined,
    type: typeof problem.type === 'string' ? problem.type : undefined,
    field: typeof problem.field === 'string' ? problem.field : undefined,
    directive: isRecord(problem.directive) ? (problem.directive as unknown as Directive) : undefined,
    state: isRecord(problem.state) ? (problem.state as OperationState) : undefined,
    results: Array.isArray(problem.results) ? problem.results : undefined,
    retryAfterSeconds:
      typeof problem.retry_after_seconds === 'number' ? problem.retry_after_seconds : retryAfterSeconds,
  });
}

export function isLedgerRefusal(error: unknown, code?: LedgerErrorCode): error is LedgerRefusal {
  return error instanceof LedgerRefusal && (code === undefined || error.code === code);
}
