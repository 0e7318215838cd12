import { RevisionConflictError, StoreUnavailableError } from '../../store/event-store.port';

/** SQLite result codes that mean "the store cannot take this now", not "the request was wrong". */
const UNAVAILABLE_CODES = [
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_FULL',
  'SQLITE_READONLY',
  'SQLITE_IOERR',
  'SQLITE_CANTOPEN',
  'SQLITE_NOMEM',
  'SQLITE_CORRUPT',
  'SQLITE_NOTADB',
  'SQLITE_PROTOCOL',
];

/** The one place a driver error becomes the port's error; driver types never cross the port. */
export function toPortError(error: unknown, stream?: string, expectedRevision?: number): Error {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') {
    if (code.startsWith('SQLITE_CONSTRAINT') && stream !== undefined && expectedRevision !== undefined) {
      return new RevisionConflictError(stream, expectedRevision, undefined);
    }
    if (UNAVAILABLE_CODES.some((prefix) => code.startsWith(prefix))) {
      const retryAfter = code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED') ? 1 : 5;
      return new StoreUnavailableError(code.toLowerCase(), retryAfter);
    }
  }
  if (error instanceof Error && /database connection is not open/i.test(error.message)) {
    return new StoreUnavailableError('database closed', 1);
  }
  return error instanceof Error ? error : new Error(String(error));
}
