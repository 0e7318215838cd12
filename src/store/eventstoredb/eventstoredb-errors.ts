import { ErrorType, convertToCommandError, isCommandError, type CommandError } from '@eventstore/db-client';
import { NO_STREAM, RevisionConflictError, StoreUnavailableError } from '../event-store.port';
import { CallTimeoutError } from './call-deadline';
import { InvalidEventError } from './eventstoredb-event-codec';

export interface ErrorContext {
  stream?: string;
  expectedRevision?: number;
  retryAfterSeconds: number;
}

/**
 * Errors that mean "the store cannot answer now", not "the request was wrong". An append that
 * ends in one of them has an unknown outcome: the caller retries it with the same event ids and
 * the same expected revision, and the server's idempotency returns the first result if it landed.
 */
const UNAVAILABLE: ReadonlySet<string> = new Set([
  ErrorType.UNAVAILABLE,
  ErrorType.DEADLINE_EXCEEDED,
  ErrorType.TIMEOUT,
  ErrorType.CANCELLED,
  // A follower answered: the client reconnects to the leader it names, so the next try goes there.
  ErrorType.NOT_LEADER,
  // What the client reports for anything it cannot classify (a reset stream, "write after end").
  ErrorType.UNKNOWN,
]);

/** The one place a driver error becomes the port's error; driver types never cross the port. */
export function toPortError(error: unknown, context: ErrorContext): Error {
  if (error instanceof RevisionConflictError || error instanceof StoreUnavailableError || error instanceof InvalidEventError) {
    return error;
  }
  if (error instanceof CallTimeoutError) return new StoreUnavailableError(error.message, context.retryAfterSeconds);
  if (!(error instanceof Error)) return new Error(String(error));
  // Some calls reject with the raw gRPC error (the server-features probe that precedes an append does).
  const converted = convertToCommandError(error);
  if (!isCommandError(converted)) return converted;
  const driverError: CommandError = converted;
  switch (driverError.type) {
    case ErrorType.WRONG_EXPECTED_VERSION: {
      const actual = driverError.actualVersion;
      return new RevisionConflictError(
        context.stream ?? driverError.streamName,
        context.expectedRevision ?? NO_STREAM,
        typeof actual === 'bigint' ? Number(actual) : actual === 'no_stream' ? NO_STREAM : undefined,
      );
    }
    case ErrorType.MAXIMUM_APPEND_SIZE_EXCEEDED:
      return new InvalidEventError('', `the batch is larger than the server's maximum append size (${driverError.maxAppendSize} bytes)`);
    case ErrorType.ACCESS_DENIED:
      // A credentials problem is an operator's to fix; until then the store is unavailable to us.
      return new StoreUnavailableError('access denied by EventStoreDB (check the credentials in the connection string)', 30);
    default:
      if (UNAVAILABLE.has(driverError.type)) {
        return new StoreUnavailableError(`${driverError.type}: ${driverError.message}`, context.retryAfterSeconds);
      }
      return new Error(`EventStoreDB refused the request (${driverError.type}): ${driverError.message}`);
  }
}

export function isStreamNotFound(error: unknown): boolean {
  return error instanceof Error && isCommandError(error) && error.type === ErrorType.STREAM_NOT_FOUND;
}
