/** EventStoreDB PROTOCOL DOUBLE for tests: an in-process gRPC server, not a database. */
export {
  DEFAULT_SERVER_VERSION,
  EventStoreDbProtocolDouble,
  defaultMaxAppendSize,
  type CommitContext,
  type CommitHooks,
  type NodeRole,
  type ProtocolDoubleOptions,
} from './protocol-double';
export { EventStoreDbProtocolCluster, type ProtocolClusterOptions } from './cluster';
export type { LoggedEvent } from './in-memory-log';
