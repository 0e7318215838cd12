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
 *   - ServerFeatures.GetSupportedMethods, which decides whether the client uses BatchAppend.
 * Faults for tests: dropConnections(), setUnavailable(), stop()/start() on the same port, and
 * commit hooks that hold an append in flight. What it does not model is listed in docs/eventstoredb.md.
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { ServerFeaturesService, type IServerFeaturesServer } from '@eventstore/db-client/generated/serverfeatures_grpc_pb';
import { SupportedMethod, SupportedMethods } from '@eventstore/db-client/generated/serverfeatures_pb';
import { AllStreamPosition, MaximumAppendSizeExceeded } from '@eventstore/db-client/generated/shared_pb';
import { StreamsService, type IStreamsServer } from '@eventstore/db-client/generated/streams_grpc_pb';
import { Code } from '@eventstore/db-client/generated/code_pb';
import { AppendReq, AppendResp, BatchAppendReq, BatchAppendResp, ReadReq, ReadResp } from '@eventstore/db-client/generated/streams_pb';
import { Empty as ProtobufEmpty } from 'google-protobuf/google/protobuf/empty_pb';
import { InMemoryLog, matches, type AppendOutcome, type ExpectedRevision, type ProposedEvent, type ReadFrom } from './in-memory-log';
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
  serverVersion?: string;
  /** The server's default maxAppendSize is 1 MiB. */
  maxAppendSize?: number;
  initialPosition?: bigint;
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
  | AppendOutcome
  | { kind: 'timeout' }
  | { kind: 'too_large'; maxAppendSize: number };

const NOT_READY = 'Server Is Not Ready';

export class EventStoreDbProtocolDouble {
  readonly log: InMemoryLog;
  hooks: CommitHooks = {};
  /** Calls received per method, so a test can tell which path the client took. */
  readonly callCounts = { Append: 0, BatchAppend: 0, Read: 0, Subscribe: 0, GetSupportedMethods: 0 };
  private server?: grpc.Server;
  private boundPort: number;
  private unavailable = false;
  private readonly calls = new Set<ActiveCall>();
  private readonly settings: Required<Omit<ProtocolDoubleOptions, 'port' | 'initialPosition'>>;

  private constructor(options: ProtocolDoubleOptions) {
    this.log = new InMemoryLog(options.initialPosition);
    this.boundPort = options.port ?? 0;
    this.settings = {
      batchAppend: options.batchAppend ?? true,
      serverVersion: options.serverVersion ?? '24.10.0',
      maxAppendSize: options.maxAppendSize ?? 1024 * 1024,
    };
    // A real log never starts empty: system streams ($stats, $settings, ...) share $all with user streams.
    this.appendSystemEvent('$settings', '$settings');
    this.appendSystemEvent('$stats-127.0.0.1:2113', '$statsCollected');
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
    const server = new grpc.Server();
    const streams: IStreamsServer = {
      read: (call) => this.read(call),
      append: (call, callback) => this.append(call, callback),
      batchAppend: (call) => this.batchAppend(call),
      delete: (_call, callback) => callback(serviceError(grpc.status.UNIMPLEMENTED, 'Delete is not modelled by the protocol double')),
      tombstone: (_call, callback) => callback(serviceError(grpc.status.UNIMPLEMENTED, 'Tombstone is not modelled by the protocol double')),
    };
    const features: IServerFeaturesServer = {
      getSupportedMethods: (_call, callback) => this.supportedMethods(callback),
    };
    server.addService(StreamsService, streams);
    server.addService(ServerFeaturesService, features);
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

  private supportedMethods(callback: grpc.sendUnaryData<SupportedMethods>): void {
    this.callCounts.GetSupportedMethods++;
    if (this.unavailable) return callback(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
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
    if (this.unavailable) return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
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
      const events = this.log.readStream(stream, readFromStream(streamOptions), backwards, count);
      if (!events) {
        await send(streamNotFound(stream));
        return;
      }
      for (const event of events) if (!(await send(eventResponse(event, structuredIds)))) return;
      return;
    }
    const all = options.getAll();
    if (!all) throw new WireError(grpc.status.INVALID_ARGUMENT, 'read of neither a stream nor $all');
    for (const event of this.log.readAll(readFromAll(all), backwards, count, filter?.filter)) {
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

  // ---- Append (client streaming) --------------------------------------------------------------

  private append(call: grpc.ServerReadableStream<AppendReq, AppendResp>, callback: grpc.sendUnaryData<AppendResp>): void {
    this.callCounts.Append++;
    const active = this.track('Append', (error) => callback(error));
    call.on('cancelled', () => active.finish());
    if (this.unavailable) return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
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
    if (this.unavailable) return active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
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
      case 'too_large': {
        const detail = new MaximumAppendSizeExceeded();
        detail.setMaxappendsize(result.maxAppendSize);
        response.setError(
          batchFailure(Code.INVALID_ARGUMENT, 'Maximum Append Size Exceeded.', detail, 'event_store.client.MaximumAppendSizeExceeded'),
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
    const size = proposed.reduce((total, event) => total + event.data.length + event.customMetadata.length, 0);
    if (size > this.settings.maxAppendSize) return { kind: 'too_large', maxAppendSize: this.settings.maxAppendSize };
    await this.hooks.beforeCommit?.(context);
    if (active.ended) return undefined;
    if (this.unavailable) {
      active.failWith(serviceError(grpc.status.UNAVAILABLE, NOT_READY));
      return undefined;
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
function write(call: grpc.ServerWritableStream<ReadReq, ReadResp>, active: ActiveCall, message: ReadResp): Promise<boolean> {
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

function toServiceError(error: unknown): ServiceError {
  if (error instanceof WireError) return serviceError(error.code, error.message);
  return serviceError(grpc.status.INTERNAL, error instanceof Error ? error.message : String(error));
}
