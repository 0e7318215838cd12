import { ErrorType, convertToCommandError, isCommandError, type CommandError } from '@eventstore/db-client';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreIntegrityError,
  StoreUnavailableError,
} from '../../store/event-store.port';
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

/**
 * What the client throws, as a plain Error, when no gossip seed names a usable node (all down, or
 * an election under way): a cluster that cannot take requests now, not a fault of the request.
 */
const DISCOVERY_FAILED = /^Failed to discover after \d+ attempts/;

/** The one place a driver error becomes the port's error; driver types never cross the port. */
export function toPortError(error: unknown, context: ErrorContext): Error {
  if (
    error instanceof RevisionConflictError ||
    error instanceof StoreUnavailableError ||
    error instanceof StoreIntegrityError ||
    error instanceof InvalidEventError
  ) {
    return error;
  }
  if (error instanceof CallTimeoutError) return new StoreUnavailableError(error.message, context.retryAfterSeconds);
  if (!(error instanceof Error)) return new Error(String(error));
  if (DISCOVERY_FAILED.test(error.message)) {
    return new StoreUnavailableError(
      `no EventStoreDB node could be discovered (${error.message})`,
      context.retryAfterSeconds,
    );
  }
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
      return new InvalidEventError(
        '',
        `the batch is larger than the server's maximum append size (${driverError.maxAppendSize} bytes)`,
      );
    case ErrorType.STREAM_DELETED:
      // Hard-deleted (tombstoned) by someone other than the ledger, which never deletes.
      return new StoreIntegrityError(
        context.stream ?? driverError.streamName,
        'the stream was hard-deleted (tombstoned) on the server',
      );
    case ErrorType.ACCESS_DENIED:
      // A credentials problem is an operator's to fix; until then the store is unavailable to us.
      return new StoreUnavailableError(
        'access denied by EventStoreDB (check the credentials in the connection string)',
        30,
      );
    default:
      if (UNAVAILABLE.has(driverError.type)) {
        // gRPC ends a refused connection's message with an empty "Resolution note: ".
        const reason = driverError.message.replace(/\s*Resolution note:\s*$/, '');
        return new StoreUnavailableError(`${driverError.type}: ${reason}`, context.retryAfterSeconds);
      }
      return new Error(`EventStoreDB refused the request (${driverError.type}): ${driverError.message}`);
  }
}

/** A follower answered a call that asked for the leader; the client has already switched to the one it named. */
export function isNotLeader(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const converted = convertToCommandError(error);
  return isCommandError(converted) && converted.type === ErrorType.NOT_LEADER;
}

export function isStreamNotFound(error: unknown): boolean {
  return error instanceof Error && isCommandError(error) && error.type === ErrorType.STREAM_NOT_FOUND;
}
