/**
 * Protobuf plumbing for the EventStoreDB PROTOCOL DOUBLE: turns the message classes that
 * `@eventstore/db-client` ships into the in-memory log's plain types and back, field by field as
 * the real server fills them (streams.proto, shared.proto, status.proto).
 */
import { Any } from 'google-protobuf/google/protobuf/any_pb';
import { Empty as ProtobufEmpty } from 'google-protobuf/google/protobuf/empty_pb';
import { Code } from '@eventstore/db-client/generated/code_pb';
import {
  Empty,
  StreamIdentifier,
  Timeout,
  UUID,
  WrongExpectedVersion as BatchWrongExpectedVersion,
} from '@eventstore/db-client/generated/shared_pb';
import { Status } from '@eventstore/db-client/generated/status_pb';
import { AppendReq, AppendResp, BatchAppendReq, ReadReq, ReadResp } from '@eventstore/db-client/generated/streams_pb';
import type { EventFilter, ExpectedRevision, LoggedEvent, ProposedEvent, ReadFrom } from './in-memory-log';

export class WireError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export function streamNameOf(identifier: StreamIdentifier | undefined): string {
  if (!identifier) throw new WireError(3, 'stream identifier missing');
  return Buffer.from(identifier.getStreamName_asU8()).toString('utf8');
}

export function streamIdentifier(name: string): StreamIdentifier {
  const identifier = new StreamIdentifier();
  identifier.setStreamName(Uint8Array.from(Buffer.from(name, 'utf8')));
  return identifier;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The server parses ids as GUIDs: anything else is refused, and ids come back lower-case. */
export function uuidOf(uuid: UUID | undefined): string {
  if (!uuid) throw new WireError(3, 'event id missing');
  if (uuid.hasString()) {
    const text = uuid.getString();
    if (!UUID_PATTERN.test(text)) throw new WireError(3, `invalid event id "${text}"`);
    return text.toLowerCase();
  }
  const structured = uuid.getStructured();
  if (!structured) throw new WireError(3, 'event id missing');
  const bytes = Buffer.alloc(16);
  bytes.writeBigInt64BE(BigInt.asIntN(64, BigInt(structured.getMostSignificantBits())), 0);
  bytes.writeBigInt64BE(BigInt.asIntN(64, BigInt(structured.getLeastSignificantBits())), 8);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function uuidMessage(id: string, structured: boolean): UUID {
  const uuid = new UUID();
  if (!structured) {
    uuid.setString(id);
    return uuid;
  }
  const bytes = Buffer.from(id.replace(/-/g, ''), 'hex');
  const bits = new UUID.Structured();
  bits.setMostSignificantBits(bytes.readBigInt64BE(0).toString());
  bits.setLeastSignificantBits(bytes.readBigInt64BE(8).toString());
  uuid.setStructured(bits);
  return uuid;
}

type ProposedMessage = AppendReq.ProposedMessage | BatchAppendReq.ProposedMessage;

/** `type` and `content-type` are required metadata on every proposed event. */
export function proposedEventOf(message: ProposedMessage): ProposedEvent {
  const metadata = message.getMetadataMap();
  const type = metadata.get('type');
  const contentType = metadata.get('content-type');
  if (!type || !contentType) throw new WireError(3, 'required metadata properties missing: type, content-type');
  return {
    id: uuidOf(message.getId()),
    type,
    contentType,
    data: message.getData_asU8(),
    customMetadata: message.getCustomMetadata_asU8(),
  };
}

export function appendExpectation(options: AppendReq.Options): ExpectedRevision {
  switch (options.getExpectedStreamRevisionCase()) {
    case AppendReq.Options.ExpectedStreamRevisionCase.REVISION:
      return { kind: 'revision', revision: BigInt(options.getRevision()) };
    case AppendReq.Options.ExpectedStreamRevisionCase.NO_STREAM:
      return { kind: 'no_stream' };
    case AppendReq.Options.ExpectedStreamRevisionCase.STREAM_EXISTS:
      return { kind: 'stream_exists' };
    default:
      return { kind: 'any' };
  }
}

export function batchExpectation(options: BatchAppendReq.Options): ExpectedRevision {
  switch (options.getExpectedStreamPositionCase()) {
    case BatchAppendReq.Options.ExpectedStreamPositionCase.STREAM_POSITION:
      return { kind: 'revision', revision: BigInt(options.getStreamPosition()) };
    case BatchAppendReq.Options.ExpectedStreamPositionCase.NO_STREAM:
      return { kind: 'no_stream' };
    case BatchAppendReq.Options.ExpectedStreamPositionCase.STREAM_EXISTS:
      return { kind: 'stream_exists' };
    default:
      return { kind: 'any' };
  }
}

/** Append (client streaming) reports a wrong expected version in-band, not as a gRPC error. */
export function appendWrongExpectedVersion(
  currentRevision: bigint | undefined,
  expected: ExpectedRevision,
): AppendResp {
  const wrong = new AppendResp.WrongExpectedVersion();
  if (currentRevision === undefined) wrong.setCurrentNoStream(new Empty());
  else wrong.setCurrentRevision(currentRevision.toString());
  switch (expected.kind) {
    case 'revision':
      wrong.setExpectedRevision(expected.revision.toString());
      break;
    case 'no_stream':
      wrong.setExpectedNoStream(new Empty());
      break;
    case 'stream_exists':
      wrong.setExpectedStreamExists(new Empty());
      break;
    case 'any':
      wrong.setExpectedAny(new Empty());
      break;
  }
  const response = new AppendResp();
  response.setWrongExpectedVersion(wrong);
  return response;
}

export function appendSuccess(currentRevision: bigint, position: bigint): AppendResp {
  const success = new AppendResp.Success();
  success.setCurrentRevision(currentRevision.toString());
  const at = new AppendResp.Position();
  at.setCommitPosition(position.toString());
  at.setPreparePosition(position.toString());
  success.setPosition(at);
  const response = new AppendResp();
  response.setSuccess(success);
  return response;
}

/** BatchAppend reports failures as a google.rpc.Status whose details the client unpacks by type name. */
export function batchFailure(
  code: Code,
  message: string,
  detail: { serializeBinary(): Uint8Array },
  typeName: string,
): Status {
  const any = new Any();
  any.pack(detail.serializeBinary(), typeName);
  const status = new Status();
  status.setCode(code);
  status.setMessage(message);
  status.setDetails(any);
  return status;
}

export function batchWrongExpectedVersion(currentRevision: bigint | undefined, expected: ExpectedRevision): Status {
  const wrong = new BatchWrongExpectedVersion();
  if (currentRevision === undefined) wrong.setCurrentNoStream(new ProtobufEmpty());
  else wrong.setCurrentStreamRevision(currentRevision.toString());
  switch (expected.kind) {
    case 'revision':
      wrong.setExpectedStreamPosition(expected.revision.toString());
      break;
    case 'no_stream':
      wrong.setExpectedNoStream(new ProtobufEmpty());
      break;
    case 'stream_exists':
      wrong.setExpectedStreamExists(new ProtobufEmpty());
      break;
    case 'any':
      wrong.setExpectedAny(new ProtobufEmpty());
      break;
  }
  return batchFailure(
    Code.FAILED_PRECONDITION,
    'Wrong expected version.',
    wrong,
    'event_store.client.WrongExpectedVersion',
  );
}

export function batchTimeout(): Status {
  return batchFailure(Code.DEADLINE_EXCEEDED, 'Timeout.', new Timeout(), 'event_store.client.Timeout');
}

export function readFromStream(options: ReadReq.Options.StreamOptions): ReadFrom {
  switch (options.getRevisionOptionCase()) {
    case ReadReq.Options.StreamOptions.RevisionOptionCase.REVISION:
      return BigInt(options.getRevision());
    case ReadReq.Options.StreamOptions.RevisionOptionCase.END:
      return 'end';
    default:
      return 'start';
  }
}

export function readFromAll(options: ReadReq.Options.AllOptions): ReadFrom {
  switch (options.getAllOptionCase()) {
    case ReadReq.Options.AllOptions.AllOptionCase.POSITION: {
      const position = options.getPosition() as ReadReq.Options.Position;
      return BigInt(position.getCommitPosition());
    }
    case ReadReq.Options.AllOptions.AllOptionCase.END:
      return 'end';
    default:
      return 'start';
  }
}

export interface ParsedFilter {
  filter: EventFilter;
  /** A filtered subscription reports a checkpoint after this many events considered. */
  checkpointEvery: number;
}

export function filterOf(options: ReadReq.Options): ParsedFilter | undefined {
  const filterOptions = options.getFilter();
  if (!options.hasFilter() || !filterOptions) return undefined;
  const onStream = filterOptions.hasStreamIdentifier();
  const expression = onStream ? filterOptions.getStreamIdentifier() : filterOptions.getEventType();
  if (!expression) throw new WireError(3, 'filter without an expression');
  const regex = expression.getRegex();
  const window = filterOptions.hasMax() ? filterOptions.getMax() : 32;
  return {
    filter: {
      on: onStream ? 'stream' : 'event_type',
      prefixes: expression.getPrefixList(),
      regex: regex ? new RegExp(regex) : undefined,
    },
    checkpointEvery: Math.max(1, window * Math.max(1, filterOptions.getCheckpointintervalmultiplier())),
  };
}

export function eventResponse(event: LoggedEvent, structuredIds: boolean): ReadResp {
  const recorded = new ReadResp.ReadEvent.RecordedEvent();
  recorded.setId(uuidMessage(event.id, structuredIds));
  recorded.setStreamIdentifier(streamIdentifier(event.stream));
  recorded.setStreamRevision(event.revision.toString());
  // Servers since 22.6 fill the $all position on stream reads too (non-transactional events).
  recorded.setCommitPosition(event.position.toString());
  recorded.setPreparePosition(event.position.toString());
  const metadata = recorded.getMetadataMap();
  metadata.set('type', event.type);
  metadata.set('content-type', event.contentType);
  metadata.set('created', event.createdTicks.toString());
  recorded.setData(event.data);
  recorded.setCustomMetadata(event.customMetadata);
  const readEvent = new ReadResp.ReadEvent();
  readEvent.setEvent(recorded);
  readEvent.setCommitPosition(event.position.toString());
  const response = new ReadResp();
  response.setEvent(readEvent);
  return response;
}

export function streamNotFound(stream: string): ReadResp {
  const notFound = new ReadResp.StreamNotFound();
  notFound.setStreamIdentifier(streamIdentifier(stream));
  const response = new ReadResp();
  response.setStreamNotFound(notFound);
  return response;
}

export function confirmation(subscriptionId: string): ReadResp {
  const confirmed = new ReadResp.SubscriptionConfirmation();
  confirmed.setSubscriptionId(subscriptionId);
  const response = new ReadResp();
  response.setConfirmation(confirmed);
  return response;
}

export function caughtUp(): ReadResp {
  const response = new ReadResp();
  response.setCaughtUp(new ReadResp.CaughtUp());
  return response;
}

export function checkpoint(position: bigint): ReadResp {
  const reached = new ReadResp.Checkpoint();
  reached.setCommitPosition(position.toString());
  reached.setPreparePosition(position.toString());
  const response = new ReadResp();
  response.setCheckpoint(reached);
  return response;
}
