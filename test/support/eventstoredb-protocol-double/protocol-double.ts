/**
 * ============================================================================================
 *  EventStoreDB PROTOCOL DOUBLE. This is NOT a database and NOT a test of EventStoreDB itself.
 * ============================================================================================
 * An in-process gRPC server, built with @grpc/grpc-js from the service definitions that
 * `@eventstore/db-client` ships (generated/streams_grpc_pb.js, serverfeatures_grpc_pb.js). The real
 * client talks real gRPC to it on loopback, so the adapter's wire behaviour (BatchAppend vs Append,
 * StreamNotFound, exclusive subscription positions, error unpacking, reconnects) is exercised
 * without a server on the machine. It implements just enough of:
 *   - Streams.Append (client streaming) and Streams.BatchAppend (bidi), with the server's
 *     expected-revision and idempotency rules as a client observes them;
 *   - Streams.Read: streams forwards/backwards, $all forwards/backwards, and subscriptions to $all
 *     (optionally filtered) that catch up and then follow live;
 *   - Streams.Delete (soft: `$tb` in the metastream) and Streams.Tombstone, and what they do to
 *     later reads and appends (see in-memory-log.ts);
 *   - ServerFeatures.GetSupportedMethods, which decides whether the client uses BatchAppend, with
 *     the server version it claims; the default maximum append size is that version's;
 *   - Gossip.Read, so cluster connection strings (several hosts) discover a node; with
 *     EventStoreDbProtocolCluster (cluster.ts) nodes are leader, follower or in an election, a
 *     follower answers `requires-leader` calls with NotLeader and the leader's endpoint, forwards
 *     other appends to the leader, and serves other reads from what has reached it.
 * Faults for tests: dropConnections(), setUnavailable(), stop()/start() on the same port, commit
 * hooks that hold an append in flight, and the cluster's elections and replication pauses. What it
 * does not model is listed in docs/eventstoredb.md.
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { GossipService, type IGossipServer } from '@eventstore/db-client/generated/gossip_grpc_pb';
import { ClusterInfo, EndPoint, MemberInfo } from '@eventstore/db-client/generated/gossip_pb';
import {
  ServerFeaturesService,
  type IServerFeaturesServer,
} from '@eventstore/db-client/generated/serverfeatures_grpc_pb';
import { SupportedMethod, SupportedMethods } from '@eventstore/db-client/generated/serverfeatures_pb';
import {
  AllStreamPosition,
  Empty,
  MaximumAppendSizeExceeded,
  StreamDeleted,
} from '@eventstore/db-client/generated/shared_pb';
import { StreamsService, type IStreamsServer } from '@eventstore/db-client/generated/streams_grpc_pb';
import { Code } from '@eventstore/db-client/generated/code_pb';
import {
  AppendReq,
  AppendResp,
  BatchAppendReq,
  BatchAppendResp,
  DeleteReq,
  DeleteResp,
  ReadReq,
  ReadResp,
  TombstoneReq,
  TombstoneResp,
} from '@eventstore/db-client/generated/streams_pb';
import { Empty as ProtobufEmpty } from 'google-protobuf/google/protobuf/empty_pb';
import {
  InMemoryLog,
  matches,
  type AppendOutcome,
  type ExpectedRevision,
  type ProposedEvent,
  type ReadFrom,
} from './in-memory-log';
import {
  WireError,
  appendExpectation,
  appendSuccess,
  appendWrongExpectedVersion,
  batchExpectation,
  batchFailure,
  batchTimeout,
  batchWrongExpectedVersion,
  caughtUp,
  checkpoint,
  confirmation,
  eventResponse,
  filterOf,
  proposedEventOf,
  readFromAll,
  readFromStream,
  streamIdentifier,
  streamNameOf,
  streamNotFound,
  type ParsedFilter,
} from './wire';

export interface ProtocolDoubleOptions {
  /** 0 picks a free port; stop() and start() keep whatever was bound. */
  port?: number;
  /** Advertise BatchAppend (servers since 21.10 do). With false the client falls back to Append. */
  batchAppend?: boolean;
  /** The version GetSupportedMethods reports; the default is the image docker-compose.yml pins. */
  serverVersion?: string;
  /** Overrides the claimed version's default (see defaultMaxAppendSize). */
  maxAppendSize?: number;
  initialPosition?: bigint;
  /** A log shared with other nodes of an EventStoreDbProtocolCluster. */
  log?: InMemoryLog;
  /** The cluster this node belongs to: its role, its peers and what has been replicated to it. */
  cluster?: ClusterView;
}

/** What a node needs to know of its cluster (implemented by EventStoreDbProtocolCluster). */
export interface ClusterView {
  roleOf(node: EventStoreDbProtocolDouble): NodeRole;
  leader(): EventStoreDbProtocolDouble | undefined;
  members(): EventStoreDbProtocolDouble[];
  /** The last position replicated to this node; undefined when it has everything. */
  replicatedUpTo(node: EventStoreDbProtocolDouble): bigint | undefined;
}

export type NodeRole = 'leader' | 'follower' | 'electing';

export const DEFAULT_SERVER_VERSION = '26.0.3';

/**
 * The server's default `MaxAppendSize` (ClusterVNodeOptions.Application): 1 MiB up to 25.0,
 * TFConsts.ChunkSize (256 MiB) from 25.1 (read in KurrentDB's sources at v24.10.0, v25.0.0,
 * v25.1.0, v25.1.4, v26.0.3 and v26.1.0).
 */
export function defaultMaxAppendSize(serverVersion: string): number {
  const [major, minor] = serverVersion.split('.').map((part) => Number.parseInt(part, 10));
  return major > 25 || (major === 25 && minor >= 1) ? 256 * 1024 * 1024 : 1024 * 1024;
}

export interface CommitContext {
  method: 'Append' | 'BatchAppend';
  stream: string;
  eventIds: string[];
}

export interface CommitHooks {
  /** After the whole append has arrived, before it is decided. Awaited: a pending promise holds it in flight. */
  beforeCommit?(context: CommitContext): Promise<void> | void;
  /** After it is written, before the answer is sent. Dropping connections here loses the answer, not the write. */
  afterCommit?(context: CommitContext): Promise<void> | void;
}

type ServiceError = Partial<grpc.StatusObject> & Error;

function isServiceError(error: unknown): error is ServiceError {
  return (
    error instanceof Error &&
    typeof (error as ServiceError).code === 'number' &&
    (error as ServiceError).metadata instanceof grpc.Metadata
  );
}

function serviceError(code: grpc.status, details: string, metadata = new grpc.Metadata()): ServiceError {
  return Object.assign(new Error(details), { code, details, metadata });
}

/** One call in progress on the double, so a fault can end it. */
class ActiveCall {
  private readonly controller = new AbortController();

  constructor(
    readonly method: string,
    private readonly fail: (error: ServiceError) => void,
    private readonly onDone: (call: ActiveCall) => void,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get ended(): boolean {
    return this.controller.signal.aborted;
  }

  /** Marks the call over; false when it already was (answered, cancelled by the client, or dropped). */
  finish(): boolean {
    if (this.ended) return false;
    this.controller.abort();
    this.onDone(this);
    return true;
  }

  failWith(error: ServiceError): void {
    if (this.finish()) this.fail(error);
  }
}

type CommitResult =
  AppendOutcome | { kind: 'timeout' } | { kind: 'too_large'; maxAppendSize: number } | { kind: 'not_leader' };

const NOT_READY = 'Server Is Not Ready';

export class EventStoreDbProtocolDouble {
  readonly log: InMemoryLog;
  hooks: CommitHooks = {};
  /** Calls received per method, so a test can tell which path the client took. */
  readonly callCounts = {
    Append: 0,
    BatchAppend: 0,
    Read: 0,
    Subscribe: 0,
    GetSupportedMethods: 0,
    Delete: 0,
    Tombstone: 0,
    Gossip: 0,
  };
  /** Every append that reached its decision, by path and stream (metadata writes go to `$$<stream>`). */
  readonly appends: Array<{ method: CommitContext['method']; stream: string }> = [];
  /** Calls a follower answered with NotLeader, and appends it forwarded to the leader instead. */
  readonly leaderRedirects = { notLeader: 0, forwardedAppends: 0 };
  private server?: grpc.Server;
  private boundPort: number;
  private unavailable = false;
  private readonly calls = new Set<ActiveCall>();
  private readonly settings: { batchAppend: boolean; serverVersion: string; maxAppendSize: number };
  private readonly cluster?: ClusterView;

  private constructor(options: ProtocolDoubleOptions) {
    this.log = options.log ?? new InMemoryLog(options.initialPosition);
    this.cluster = options.cluster;
    this.boundPort = options.port ?? 0;
    const serverVersion = options.serverVersion ?? DEFAULT_SERVER_VERSION;
    this.settings = {
      batchAppend: options.batchAppend ?? true,
      serverVersion,
      maxAppendSize: options.maxAppendSize ?? defaultMaxAppendSize(serverVersion),
    };
    // A real log never starts empty: system streams ($stats, $settings, ...) share $all with user streams.
    if (!options.log) {
      this.appendSystemEvent('$settings', '$settings');
      this.appendSystemEvent('$stats-127.0.0.1:2113', '$statsCollected');
    }
  }

  get serverVersion(): string {
    return this.settings.serverVersion;
  }

  get maxAppendSize(): number {
    return this.settings.maxAppendSize;
  }

  get role(): NodeRole {
    return this.cluster?.roleOf(this) ?? 'leader';
  }

  static async start(options: ProtocolDoubleOptions = {}): Promise<EventStoreDbProtocolDouble> {
    const double = new EventStoreDbProtocolDouble(options);
    await double.start();
    return double;
  }

  get port(): number {
    return this.boundPort;
  }

  /** Insecure single node, as `docker compose up eventstore` runs it. */
  get connectionString(): string {
    return `esdb://127.0.0.1:${this.boundPort}?tls=false`;
  }

  get activeCalls(): number {
    return this.calls.size;
  }

  /** Listens again on the same port with the same log, like a node coming back after a restart. */
  async start(): Promise<void> {
    if (this.server) return;
    // Each proposed event is one message: room for an event as large as the append limit.
    const server = new grpc.Server({ 'grpc.max_receive_message_length': this.settings.maxAppendSize + 1024 * 1024 });
    const streams: IStreamsServer = {
      read: (call) => this.read(call),
      append: (call, callback) => this.append(call, callback),
      batchAppend: (call) => this.batchAppend(call),
      delete: (call, callback) => this.delete(call, callback),
      tombstone: (call, callback) => this.tombstone(call, callback),
    };
    const features: IServerFeaturesServer = {
      getSupportedMethods: (_call, callback) => this.supportedMethods(callback),
    };
    const gossip: IGossipServer = {
      read: (_call, callback) => this.gossip(callback),
    };
    server.addService(StreamsService, streams);
    server.addService(ServerFeaturesService, features);
    server.addService(GossipService, gossip);
    this.boundPort = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${this.boundPort}`, grpc.ServerCredentials.createInsecure(), (error, port) =>
        error ? reject(error) : resolve(port),
      ),
    );
    this.server = server;
  }

  /** Ends every call as a shutting-down node would, then closes the listener. The log survives. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    this.dropConnections('server shutting down');
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, 500);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  /**
   * Ends active calls (subscriptions, reads, appends in flight) with UNAVAILABLE: all of them, or
   * only those of the given methods ('Read', 'Append', 'BatchAppend'). Returns how many.
   */
  dropConnections(reason = 'connection dropped by the protocol double', methods?: string[]): number {
    const calls = [...this.calls].filter((call) => !methods || methods.includes(call.method));
    for (const call of calls) call.failWith(serviceError(grpc.status.UNAVAILABLE, reason));
    return calls.length;
  }

  /** While on, every new call, and every append reaching its commit, fails with UNAVAILABLE. */
  setUnavailable(unavailable: boolean): void {
    this.unavailable = unavailable;
  }

  /** Writes an event as the server's own subsystems do, to interleave system records with user ones. */
  appendSystemEvent(stream = '$stats-127.0.0.1:2113', type = '$statsCollected'): void {
    const data = Buffer.from(JSON.stringify({ note: 'system record written by the protocol double' }));
    this.log.append(stream, { kind: 'any' }, [
      { id: randomUUID(), type, contentType: 'application/json', data, customMetadata: new Uint8Array() },
    ]);
  }

  private track(method: string, fail: (error: ServiceError) => void): ActiveCall {
    const call = new ActiveCall(method, fail, (done) => this.calls.delete(done));
    this.calls.add(call);
    return call;
  }

  /** Unavailable by a test's fault, or because no leader has been elected (NotHandled NotReady). */
  private get refusing(): boolean {
    return this.unavailable || this.role === 'electing';
  }

  /**
   * A follower refuses a call that asks for the leader (RpcExceptions.LeaderInfo: NOT_FOUND with
   * the leader's endpoint in the trailers); the client then reconnects there. undefined: serve it.
   */
  private leaderRefusal(metadata: grpc.Metadata): ServiceError | undefined {
    if (this.role !== 'follower' || metadata.get('requires-leader')[0] !== 'true') return undefined;
    const leader = this.cluster?.leader();
    if (!leader) return serviceError(grpc.status.UNKNOWN, 'No leader info available in response');
    this.leaderRedirects.notLeader++;
    const trailers = new grpc.Metadata();
    trailers.set('exception', 'not-leader');
    trailers.set('leader-endpoint-host', '127.0.0.1');
    trailers.set('leader-endpoint-port', String(leader.port));
    return serviceError(grpc.status.NOT_FOUND, 'Leader info available', trailers);
  }

  /** What has reached this node: everything on a leader, up to the replication point on a follower. */
  private get visibleUpTo(): bigint | undefined {
    return this.role === 'follower' ? this.cluster?.replicatedUpTo(this) : undefined;
  }

  /** Every member as the cluster sees it; a lone node is its own leader. */
  private gossip(callback: grpc.sendUnaryData<ClusterInfo>): void {
    this.callCounts.Gossip++;
    const info = new ClusterInfo();
    for (const node of this.cluster?.members() ?? [this]) {
      const member = new MemberInfo();
      const role = node.role;
      member.setState(
        role === 'leader'
          ? MemberInfo.VNodeState.LEADER
          : role === 'follower'
            ? MemberInfo.VNodeState.FOLLOWER
            : MemberInfo.VNodeState.DISCOVERLEADER,
      );
      member.setIsAlive(node.server !== undefined);
      member.setTimeStamp(String(BigInt(Date.now()) * 10_000n));
      const endpoint = new EndPoint();
      endpoint.setAddress('127.0.0.1');
      endpoint.setPort(node.port);
      member.setHttpEndPoint(endpoint);
      info.addMembers(member);
    }
    callback(null, info);
  }

  private supportedMethods(callback: grpc.sendUnaryData<SupportedMethods>): void {
    this.callCounts.GetSupportedMethods++;
    if (this.refusing) return callback(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
    const methods = new SupportedMethods();
    methods.setEventStoreServerVersion(this.settings.serverVersion);
    const add = (service: string, method: string) => {
      const supported = new SupportedMethod();
      supported.setServiceName(service);
      supported.setMethodName(method);
      methods.addMethods(supported);
    };
    add('event_store.client.streams.streams', 'read');
    add('event_store.client.streams.streams', 'append');
    if (this.settings.batchAppend) add('event_store.client.streams.streams', 'batchappend');
    add('event_store.client.server_features.serverfeatures', 'getsupportedmethods');
    callback(null, methods);
  }

  // ---- Read: streams, $all, subscriptions to $all -------------------------------------------

  private read(call: grpc.ServerWritableStream<ReadReq, ReadResp>): void {
    const active = this.track('Read', (error) => call.emit('error', error));
    call.on('cancelled', () => active.finish());
    if (this.refusing) return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
    const refusal = this.leaderRefusal(call.metadata);
    if (refusal) return active.failWith(refusal);
    this.serveRead(call, active).then(
      () => {
        if (active.finish()) call.end();
      },
      (error: unknown) => active.failWith(toServiceError(error)),
    );
  }

  private async serveRead(call: grpc.ServerWritableStream<ReadReq, ReadResp>, active: ActiveCall): Promise<void> {
    const options = call.request.getOptions();
    if (!options) throw new WireError(grpc.status.INVALID_ARGUMENT, 'read options missing');
    const structuredIds = options.getUuidOption()?.hasStructured() ?? false;
    const backwards = options.getReadDirection() === ReadReq.Options.ReadDirection.BACKWARDS;
    const filter = filterOf(options);
    const send = (message: ReadResp) => write(call, active, message);

    if (options.hasSubscription()) {
      const all = options.getAll();
      if (!all) throw new WireError(grpc.status.UNIMPLEMENTED, 'the protocol double serves subscriptions to $all only');
      this.callCounts.Subscribe++;
      return this.serveSubscription(active, send, readFromAll(all), filter, structuredIds);
    }
    this.callCounts.Read++;
    const count = readCount(options.getCount());
    const streamOptions = options.getStream();
    if (streamOptions) {
      const stream = streamNameOf(streamOptions.getStreamIdentifier());
      const events = this.log.readStream(stream, readFromStream(streamOptions), backwards, count, this.visibleUpTo);
      if (events === 'deleted') throw streamDeletedError(stream);
      if (!events) {
        await send(streamNotFound(stream));
        return;
      }
      for (const event of events) if (!(await send(eventResponse(event, structuredIds)))) return;
      return;
    }
    const all = options.getAll();
    if (!all) throw new WireError(grpc.status.INVALID_ARGUMENT, 'read of neither a stream nor $all');
    for (const event of this.log.readAll(readFromAll(all), backwards, count, filter?.filter, this.visibleUpTo)) {
      if (!(await send(eventResponse(event, structuredIds)))) return;
    }
  }

  /**
   * Confirmation, then every matching event after the start position (exclusive, as on the
   * server), then CaughtUp, then live events as they are written. One cursor over the log serves
   * catch-up and live alike, so an event is never skipped or sent twice within one call.
   */
  private async serveSubscription(
    active: ActiveCall,
    send: (message: ReadResp) => Promise<boolean>,
    from: ReadFrom,
    filter: ParsedFilter | undefined,
    structuredIds: boolean,
  ): Promise<void> {
    if (!(await send(confirmation(randomUUID())))) return;
    let index = from === 'start' ? 0 : from === 'end' ? this.log.events.length : this.log.firstAtOrAfter(from + 1n);
    let considered = 0;
    let caught = false;
    while (!active.ended) {
      const events = this.log.events;
      while (index < events.length) {
        const event = events[index++];
        if (matches(event, filter?.filter)) {
          considered = 0;
          if (!(await send(eventResponse(event, structuredIds)))) return;
        } else if (filter && ++considered >= filter.checkpointEvery) {
          considered = 0;
          if (!(await send(checkpoint(event.position)))) return;
        }
      }
      if (!caught) {
        caught = true;
        if (!(await send(caughtUp()))) return;
      }
      if (index < this.log.events.length) continue;
      await this.log.nextAppend(active.signal);
    }
  }

  // ---- Delete (soft) and Tombstone (hard) --------------------------------------------------------

  private delete(call: grpc.ServerUnaryCall<DeleteReq, DeleteResp>, callback: grpc.sendUnaryData<DeleteResp>): void {
    this.callCounts.Delete++;
    const refused = this.refusing
      ? serviceError(grpc.status.UNAVAILABLE, NOT_READY)
      : this.leaderRefusal(call.metadata);
    if (refused) return callback(refused);
    const options = call.request.getOptions();
    if (!options) return callback(serviceError(grpc.status.INVALID_ARGUMENT, 'delete options missing'));
    const stream = streamNameOf(options.getStreamIdentifier());
    const failure = this.deletable(stream, deleteExpectation(options));
    if (failure) return callback(failure);
    const metadata = this.log.softDelete(stream);
    const response = new DeleteResp();
    const position = new DeleteResp.Position();
    position.setCommitPosition(metadata.position.toString());
    position.setPreparePosition(metadata.position.toString());
    response.setPosition(position);
    callback(null, response);
  }

  private tombstone(
    call: grpc.ServerUnaryCall<TombstoneReq, TombstoneResp>,
    callback: grpc.sendUnaryData<TombstoneResp>,
  ): void {
    this.callCounts.Tombstone++;
    const refused = this.refusing
      ? serviceError(grpc.status.UNAVAILABLE, NOT_READY)
      : this.leaderRefusal(call.metadata);
    if (refused) return callback(refused);
    const options = call.request.getOptions();
    if (!options) return callback(serviceError(grpc.status.INVALID_ARGUMENT, 'tombstone options missing'));
    const stream = streamNameOf(options.getStreamIdentifier());
    const failure = this.deletable(stream, deleteExpectation(options));
    if (failure) return callback(failure);
    this.log.tombstone(stream);
    const response = new TombstoneResp();
    response.setNoPosition(new Empty());
    callback(null, response);
  }

  /** A delete is checked like an append of nothing: at the expected revision, of a stream that exists. */
  private deletable(stream: string, expected: ExpectedRevision): ServiceError | undefined {
    const current = this.log.streamRevision(stream);
    const matches =
      expected.kind === 'any' ||
      (expected.kind === 'stream_exists' && current !== undefined) ||
      (expected.kind === 'no_stream' && current === undefined) ||
      (expected.kind === 'revision' && current === expected.revision);
    if (matches && this.log.streamExists(stream)) return undefined;
    const trailers = new grpc.Metadata();
    trailers.set('exception', 'wrong-expected-version');
    trailers.set('stream-name', stream);
    trailers.set('expected-version', expected.kind === 'revision' ? expected.revision.toString() : '-1');
    trailers.set('actual-version', current === undefined ? '' : current.toString());
    return serviceError(
      grpc.status.FAILED_PRECONDITION,
      `Delete failed due to WrongExpectedVersion. Stream: ${stream}`,
      trailers,
    );
  }

  // ---- Append (client streaming) --------------------------------------------------------------

  private append(
    call: grpc.ServerReadableStream<AppendReq, AppendResp>,
    callback: grpc.sendUnaryData<AppendResp>,
  ): void {
    this.callCounts.Append++;
    const active = this.track('Append', (error) => callback(error));
    call.on('cancelled', () => active.finish());
    if (this.refusing) return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
    const refusal = this.leaderRefusal(call.metadata);
    if (refusal) return active.failWith(refusal);
    let options: AppendReq.Options | undefined;
    const proposed: ProposedEvent[] = [];
    call.on('data', (request: AppendReq) => {
      try {
        if (request.hasOptions()) options = request.getOptions();
        const message = request.getProposedMessage();
        if (message) proposed.push(proposedEventOf(message));
      } catch (error) {
        active.failWith(toServiceError(error));
      }
    });
    // Nothing is decided before the client half-closes: a call dropped mid-stream writes nothing.
    call.on('end', () => {
      const run = async () => {
        if (active.ended) return;
        if (!options) throw new WireError(grpc.status.INVALID_ARGUMENT, 'append options missing');
        const stream = streamNameOf(options.getStreamIdentifier());
        const result = await this.commit('Append', active, stream, appendExpectation(options), proposed);
        if (!result) return;
        if (result.kind === 'too_large') {
          const trailers = new grpc.Metadata();
          trailers.set('exception', 'maximum-append-size-exceeded');
          trailers.set('maximum-append-size', String(result.maxAppendSize));
          return active.failWith(serviceError(grpc.status.INVALID_ARGUMENT, 'Maximum Append Size Exceeded.', trailers));
        }
        if (result.kind === 'timeout') return active.failWith(serviceError(grpc.status.DEADLINE_EXCEEDED, 'Timeout'));
        if (result.kind === 'stream_deleted') return active.failWith(streamDeletedError(stream));
        if (result.kind === 'not_leader') return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
        if (!active.finish()) return;
        callback(
          null,
          result.kind === 'wrong_expected_version'
            ? appendWrongExpectedVersion(result.currentRevision, result.expected)
            : appendSuccess(result.currentRevision, result.position),
        );
      };
      run().catch((error: unknown) => active.failWith(toServiceError(error)));
    });
  }

  // ---- BatchAppend (bidi) ---------------------------------------------------------------------

  private batchAppend(call: grpc.ServerDuplexStream<BatchAppendReq, BatchAppendResp>): void {
    this.callCounts.BatchAppend++;
    const active = this.track('BatchAppend', (error) => call.emit('error', error));
    call.on('cancelled', () => active.finish());
    if (this.refusing) return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
    const refusal = this.leaderRefusal(call.metadata);
    if (refusal) return active.failWith(refusal);
    // A batch may arrive in several requests under one correlation id; it is applied on is_final.
    const pending = new Map<string, { options?: BatchAppendReq.Options; proposed: ProposedEvent[] }>();
    const inFlight = new Set<Promise<void>>();
    call.on('data', (request: BatchAppendReq) => {
      try {
        const correlationId = request.getCorrelationId();
        const key = correlationId?.getString() ?? '';
        const entry = pending.get(key) ?? { proposed: [] };
        pending.set(key, entry);
        if (request.hasOptions()) entry.options = request.getOptions();
        for (const message of request.getProposedMessagesList()) entry.proposed.push(proposedEventOf(message));
        if (!request.getIsFinal()) return;
        pending.delete(key);
        const work: Promise<void> = this.applyBatch(call, active, request, entry)
          .catch((error: unknown) => active.failWith(toServiceError(error)))
          .finally(() => inFlight.delete(work));
        inFlight.add(work);
      } catch (error) {
        active.failWith(toServiceError(error));
      }
    });
    call.on('end', () => {
      void Promise.allSettled([...inFlight]).then(() => {
        if (active.finish()) call.end();
      });
    });
  }

  private async applyBatch(
    call: grpc.ServerDuplexStream<BatchAppendReq, BatchAppendResp>,
    active: ActiveCall,
    request: BatchAppendReq,
    entry: { options?: BatchAppendReq.Options; proposed: ProposedEvent[] },
  ): Promise<void> {
    const options = entry.options;
    if (!options) throw new WireError(grpc.status.INVALID_ARGUMENT, 'batch append options missing');
    const stream = streamNameOf(options.getStreamIdentifier());
    const expected = batchExpectation(options);
    const deadline = options.getDeadline()?.toDate().getTime();
    const result = await this.commit('BatchAppend', active, stream, expected, entry.proposed, deadline);
    if (!result) return;
    const response = new BatchAppendResp();
    response.setCorrelationId(request.getCorrelationId());
    response.setStreamIdentifier(streamIdentifier(stream));
    echoExpectation(response, expected);
    switch (result.kind) {
      case 'written':
      case 'idempotent': {
        const success = new BatchAppendResp.Success();
        success.setCurrentRevision(result.currentRevision.toString());
        const position = new AllStreamPosition();
        position.setCommitPosition(result.position.toString());
        position.setPreparePosition(result.position.toString());
        success.setPosition(position);
        response.setSuccess(success);
        break;
      }
      case 'wrong_expected_version':
        response.setError(batchWrongExpectedVersion(result.currentRevision, result.expected));
        break;
      case 'timeout':
        response.setError(batchTimeout());
        break;
      case 'stream_deleted': {
        const detail = new StreamDeleted();
        detail.setStreamIdentifier(streamIdentifier(stream));
        response.setError(
          batchFailure(Code.FAILED_PRECONDITION, 'Stream deleted.', detail, 'event_store.client.StreamDeleted'),
        );
        break;
      }
      case 'not_leader':
        return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
      case 'too_large': {
        const detail = new MaximumAppendSizeExceeded();
        detail.setMaxappendsize(result.maxAppendSize);
        response.setError(
          batchFailure(
            Code.INVALID_ARGUMENT,
            'Maximum Append Size Exceeded.',
            detail,
            'event_store.client.MaximumAppendSizeExceeded',
          ),
        );
        break;
      }
    }
    if (!active.ended) call.write(response);
  }

  /**
   * The one place an append is decided, for both Append and BatchAppend. undefined means the call
   * ended (dropped or cancelled) and no answer goes out; whether the write happened depends on
   * whether that was before or after the commit, exactly the uncertainty a real client faces.
   */
  private async commit(
    method: CommitContext['method'],
    active: ActiveCall,
    stream: string,
    expected: ExpectedRevision,
    proposed: ProposedEvent[],
    deadline?: number,
  ): Promise<CommitResult | undefined> {
    const context: CommitContext = { method, stream, eventIds: proposed.map((event) => event.id) };
    this.appends.push({ method, stream });
    const size = proposed.reduce((total, event) => total + event.data.length + event.customMetadata.length, 0);
    if (size > this.settings.maxAppendSize) return { kind: 'too_large', maxAppendSize: this.settings.maxAppendSize };
    await this.hooks.beforeCommit?.(context);
    if (active.ended) return undefined;
    if (this.refusing) {
      active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
      return undefined;
    }
    // A follower forwards a write that did not ask for the leader; the leader decides it.
    if (this.role === 'follower') {
      if (!this.cluster?.leader()) return { kind: 'not_leader' };
      this.leaderRedirects.forwardedAppends++;
    }
    if (deadline !== undefined && Date.now() > deadline) return { kind: 'timeout' };
    const outcome = this.log.append(stream, expected, proposed);
    await this.hooks.afterCommit?.(context);
    if (active.ended) return undefined;
    return outcome;
  }
}

function echoExpectation(response: BatchAppendResp, expected: ExpectedRevision): void {
  switch (expected.kind) {
    case 'revision':
      response.setStreamPosition(expected.revision.toString());
      break;
    case 'no_stream':
      response.setNoStream(new ProtobufEmpty());
      break;
    case 'stream_exists':
      response.setStreamExists(new ProtobufEmpty());
      break;
    case 'any':
      response.setAny(new ProtobufEmpty());
      break;
  }
}

/** Writes with backpressure; false once the call has ended, so the caller stops producing. */
function write(
  call: grpc.ServerWritableStream<ReadReq, ReadResp>,
  active: ActiveCall,
  message: ReadResp,
): Promise<boolean> {
  if (active.ended) return Promise.resolve(false);
  if (call.write(message)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = () => {
      call.off('drain', done);
      active.signal.removeEventListener('abort', done);
      resolve(!active.ended);
    };
    call.on('drain', done);
    active.signal.addEventListener('abort', done);
  });
}

/** uint64 on the wire; the client sends Number.MAX_SAFE_INTEGER for "everything". */
function readCount(count: string): number {
  const value = BigInt(count || '0');
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
}

/** RpcExceptions.StreamDeleted: a tombstoned stream. */
function streamDeletedError(stream: string): ServiceError {
  const trailers = new grpc.Metadata();
  trailers.set('exception', 'stream-deleted');
  trailers.set('stream-name', stream);
  return serviceError(grpc.status.FAILED_PRECONDITION, `Event stream '${stream}' is deleted.`, trailers);
}

function deleteExpectation(options: DeleteReq.Options | TombstoneReq.Options): ExpectedRevision {
  switch (options.getExpectedStreamRevisionCase()) {
    case DeleteReq.Options.ExpectedStreamRevisionCase.REVISION:
      return { kind: 'revision', revision: BigInt(options.getRevision()) };
    case DeleteReq.Options.ExpectedStreamRevisionCase.NO_STREAM:
      return { kind: 'no_stream' };
    case DeleteReq.Options.ExpectedStreamRevisionCase.STREAM_EXISTS:
      return { kind: 'stream_exists' };
    default:
      return { kind: 'any' };
  }
}

function toServiceError(error: unknown): ServiceError {
  if (isServiceError(error)) return error;
  if (error instanceof WireError) return serviceError(error.code, error.message);
  return serviceError(grpc.status.INTERNAL, error instanceof Error ? error.message : String(error));
}
