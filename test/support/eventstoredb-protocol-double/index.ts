/** EventStoreDB PROTOCOL DOUBLE for tests: an in-process gRPC server, not a database. */
export { EventStoreDbProtocolDouble, type CommitContext, type CommitHooks, type ProtocolDoubleOptions } from './protocol-double';
export type { LoggedEvent } from './in-memory-log';
