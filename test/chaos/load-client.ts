/**
 * One load client of the campaign, run as its own process (child_process.fork): a runtime that
 * drives operations through the SDK (executeWrite, verify, LedgerClient) against a simulated
 * provider, while the campaign SIGKILLs the service under it.
 *
 * The discipline under test is the SDK's: every fact's event_id is fixed before the first send, and
 * after a timeout or a refused connection the very same id is sent again, so a fact the ledger
 * committed just before it died is answered `duplicate` instead of being appended twice. The
 * client's own retries cover short gaps; the loop here covers a whole restart.
 *
 * Every answer the client acts on is written to its NDJSON file before it goes on (records.ts).
 */
import { appendFileSync } from 'node:fs';
import {
  LedgerClient,
  LedgerRefusal,
  LedgerUnavailable,
  OutcomeNotRecordedError,
  executeWrite,
  inputHash,
  verify,
  type LedgerApi,
  type Lookup,
  type OperationState,
  type SingleFactOptions,
  type SubmitAnswer,
  type ToolCall,
  type ToolEnvelope,
  type WriteOutcome,
  type WriteStep,
} from '@recovery-ledger/client';
import { seededRandom, type Random } from './prng';
import type { ChildMessage, ClientConfig, ClientStats, LoadRecord, ParentMessage } from './records';
import { setTimeout as sleep } from 'node:timers/promises';

/** Sends of one event id before the client gives up: about 15 s of outage, far more than a restart takes. */
const MAX_SENDS = 60;
/** Rounds of one operation's state machine; every path of section 4 ends well within it. */
const MAX_ROUNDS = 14;
/** The consistency window of every step: short, so not_found verifications happen within a run. */
export const CONSISTENCY_WINDOW_MS = 250;
/** The longest wait the client takes for a not_before, so a stopping client stops soon. */
const MAX_WAIT_MS = 2_000;
export const TOOLS = ['create_invoice', 'send_email', 'open_ticket', 'deploy_service'] as const;

interface Input {
  item: number;
  /** Bumped by a correction, which changes the input hash. */
  version: number;
}

type Behaviour =
  | 'commit'
  | 'commit_then_lose_answer'
  | 'lose_before_commit'
  | 'invalid_input'
  | 'rate_limited'
  | 'needs_approval'
  | 'rejected';

const BEHAVIOURS: Record<Behaviour, number> = {
  commit: 40,
  commit_then_lose_answer: 12,
  lose_before_commit: 10,
  invalid_input: 12,
  rate_limited: 12,
  needs_approval: 8,
  rejected: 3,
};

class Recorder {
  constructor(
    private readonly file: string,
    private readonly client: number,
  ) {}

  write(record: LoadRecord): void {
    appendFileSync(this.file, `${JSON.stringify(record)}\n`);
  }

  anomaly(ref: string, what: string, detail: string, status?: number): void {
    this.write({
      kind: 'anomaly',
      client: this.client,
      ref,
      what,
      detail: detail.slice(0, 500),
      ...(status === undefined ? {} : { status }),
    });
  }
}

/**
 * The SDK's LedgerApi with the resend discipline around each submit, recording what came back.
 * executeWrite and verify run on it unchanged.
 */
class RecordingLedger implements LedgerApi {
  readonly stats = { requests: 0, resends: 0, gaveUp: 0 };

  private turn = 0;

  constructor(
    private readonly clients: readonly LedgerClient[],
    private readonly recorder: Recorder,
    private readonly clientId: number,
    private readonly random: Random,
  ) {}

  planStep: LedgerApi['planStep'] = (ref, data, options = {}) =>
    this.submitOne(ref, 'StepPlanned', options, (client, o) => client.planStep(ref, data, o));
  dispatchAttempt: LedgerApi['dispatchAttempt'] = (ref, data, options = {}) =>
    this.submitOne(ref, 'AttemptDispatched', options, (client, o) => client.dispatchAttempt(ref, data, o));
  recordEnvelope: LedgerApi['recordEnvelope'] = (ref, data, options = {}) =>
    this.submitOne(ref, 'EnvelopeRecorded', options, (client, o) => client.recordEnvelope(ref, data, o));
  recordVerification: LedgerApi['recordVerification'] = (ref, data, options = {}) =>
    this.submitOne(ref, 'VerificationRecorded', options, (client, o) => client.recordVerification(ref, data, o));
  recordApproval: LedgerClient['recordApproval'] = (ref, data, options = {}) =>
    this.submitOne(ref, 'ApprovalRecorded', options, (client, o) => client.recordApproval(ref, data, o));

  getEvents: LedgerApi['getEvents'] = (ref, options) => this.read(ref, (client) => client.getEvents(ref, options));
  recoveryItems: LedgerApi['recoveryItems'] = (query) => this.next().recoveryItems(query);

  getOperation(ref: string): Promise<OperationState> {
    return this.read(ref, (client) => client.getOperation(ref));
  }

  newEventId(): string {
    return this.clients[0].newEventId();
  }

  /** The instances in turn: consecutive requests, and the resends of one, go to different processes. */
  private next(): LedgerClient {
    this.turn = (this.turn + 1) % this.clients.length;
    return this.clients[this.turn];
  }

  private async submitOne(
    ref: string,
    type: string,
    options: SingleFactOptions,
    send: (client: LedgerClient, options: SingleFactOptions) => Promise<SubmitAnswer>,
  ): Promise<SubmitAnswer> {
    // Chosen once, before the first send: every resend below is the same fact.
    const eventId = options.eventId ?? this.newEventId();
    let last: unknown;
    for (let sends = 1; sends <= MAX_SENDS; sends++) {
      this.stats.requests += 1;
      if (sends > 1) this.stats.resends += 1;
      try {
        const answer = await send(this.next(), { ...options, eventId });
        const result = answer.results.find((item) => item.event_id === eventId);
        if (!result) this.recorder.anomaly(ref, 'ack_without_result', JSON.stringify(answer.results));
        this.recorder.write({
          kind: 'ack',
          client: this.clientId,
          ref,
          event_id: eventId,
          type,
          status: result?.status ?? 'appended',
          revision: answer.revision,
          position: answer.position,
          state_status: answer.state.status,
          replayed: answer.replayed === true,
          sends,
        });
        return answer;
      } catch (error) {
        last = error;
        // Not a refusal of the fact: an earlier send with the same Idempotency-Key is still being
        // decided (a resend after a lost answer); the contract says to send again once it is answered.
        if (error instanceof LedgerRefusal && error.code === 'IDEMPOTENCY_KEY_IN_FLIGHT') {
          await sleep(150 + this.random.int(0, 150));
          continue;
        }
        if (error instanceof LedgerRefusal) {
          this.recorder.write({
            kind: 'refusal',
            client: this.clientId,
            ref,
            event_id: eventId,
            type,
            code: String(error.code),
            ...(typeof error.state?.revision === 'number' ? { revision: error.state.revision } : {}),
            sends,
          });
          throw error;
        }
        if (!(error instanceof LedgerUnavailable)) {
          this.recorder.anomaly(
            ref,
            'unexpected_answer',
            `${type}: ${String((error as Error).message)}`,
            (error as { status?: number }).status,
          );
          throw error;
        }
        // 503 is the store saying "not now"; any other 5xx is the service failing a request.
        if (error.status >= 500 && error.status !== 503)
          this.recorder.anomaly(ref, 'server_error', `${type}: ${error.message}`, error.status);
        await sleep(150 + this.random.int(0, 150));
      }
    }
    this.stats.gaveUp += 1;
    this.recorder.anomaly(ref, 'gave_up', `${type} ${eventId}: ${String((last as Error)?.message)}`);
    throw last;
  }

  private async read<T>(ref: string, get: (client: LedgerClient) => Promise<T>): Promise<T> {
    let last: unknown;
    for (let tries = 1; tries <= MAX_SENDS; tries++) {
      this.stats.requests += 1;
      try {
        return await get(this.next());
      } catch (error) {
        last = error;
        if (!(error instanceof LedgerUnavailable)) throw error;
        await sleep(150 + this.random.int(0, 150));
      }
    }
    this.stats.gaveUp += 1;
    this.recorder.anomaly(ref, 'gave_up', `read: ${String((last as Error)?.message)}`);
    throw last;
  }
}

/**
 * The provider the tools write to, in this process: it remembers what it committed per
 * operation_ref (its idempotency key), which is what the verification lookup reads. Every commit is
 * recorded, so the checker can count writes per operation: more than one is a duplicate write.
 */
class SimulatedProvider {
  private readonly committed = new Map<string, string>();

  constructor(
    private readonly recorder: Recorder,
    private readonly clientId: number,
    private readonly random: Random,
  ) {}

  commit(ref: string, attempt: number): string {
    const evidence = this.committed.get(ref) ?? `inv_${ref.replace(/[^a-z0-9]/gi, '_')}_${attempt}`;
    this.committed.set(ref, evidence);
    this.recorder.write({ kind: 'tool_write', client: this.clientId, ref, attempt });
    return evidence;
  }

  /** The contract's verification tool: a read by operation_ref; now and then the lookup itself is down. */
  readonly lookup: Lookup = async (ref) => {
    if (this.random.chance(0.04)) throw new Error('lookup service unavailable');
    const evidence = this.committed.get(ref);
    return evidence === undefined ? { found: false } : { found: true, evidenceRef: evidence };
  };

  toolFor(behaviourOf: (attempt: number, input: Input) => Behaviour): ToolCall<Input> {
    return async (input, context) => {
      const ref = context.operationRef;
      const now = Date.now();
      const base = { operation_ref: ref };
      switch (behaviourOf(context.attempt, input)) {
        case 'commit': {
          const evidence = this.commit(ref, context.attempt);
          return {
            ok: true,
            ...base,
            commit_state: 'committed',
            result: { id: evidence },
            verification: { checked_at: new Date(now).toISOString(), evidence_ref: evidence },
          } satisfies ToolEnvelope;
        }
        case 'commit_then_lose_answer':
          this.commit(ref, context.attempt);
          // The connection breaks after the provider committed: the normalizer must say unknown.
          throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
        case 'lose_before_commit':
          throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
        case 'invalid_input':
          return {
            ok: false,
            code: 'INVALID_RECIPIENT_ADDRESS',
            category: 'validation',
            commit_state: 'not_committed',
            retry: { directive: 'after_input_fix', max_attempts_remaining: 2 },
            next_action: 'correct_input',
            ...base,
            safe_details: { field: 'recipient_email' },
            agent_message: 'recipient_email is invalid; request a corrected address.',
            user_message: 'I need a valid recipient address before I can send this.',
          } satisfies ToolEnvelope;
        case 'rate_limited':
          return {
            ok: false,
            code: 'PROVIDER_UNAVAILABLE',
            category: 'dependency',
            commit_state: 'not_committed',
            retry: {
              directive: 'after_delay',
              not_before: new Date(now + this.random.int(100, 400)).toISOString(),
              max_attempts_remaining: 3,
            },
            next_action: 'wait_and_retry',
            ...base,
            safe_details: { retry_after: 1 },
            agent_message: 'The provider is unavailable; nothing was sent.',
            user_message: 'The provider is unavailable right now.',
          } satisfies ToolEnvelope;
        case 'needs_approval':
          return {
            ok: false,
            code: 'MISSING_APPROVAL',
            category: 'authorization',
            commit_state: 'not_committed',
            retry: { directive: 'never', max_attempts_remaining: 1 },
            next_action: 'request_approval',
            ...base,
            safe_details: {},
            agent_message: 'An approval is needed.',
            user_message: 'This needs an approval first.',
          } satisfies ToolEnvelope;
        case 'rejected':
          return {
            ok: false,
            code: 'VERSION_CONFLICT',
            category: 'conflict',
            commit_state: 'not_committed',
            retry: { directive: 'never', max_attempts_remaining: 0 },
            next_action: 'escalate',
            ...base,
            safe_details: { resource_version: 7 },
            agent_message: 'The record changed since it was read.',
            user_message: 'This needs attention from a person.',
          } satisfies ToolEnvelope;
      }
    };
  }
}

/** The runtime's side of one operation: the contract's state machine, driven by what the ledger answers. */
async function driveOperation(
  ledger: RecordingLedger,
  provider: SimulatedProvider,
  random: Random,
  recorder: Recorder,
  ref: string,
  runId: string,
): Promise<void> {
  const step: WriteStep<Input> = {
    operationRef: ref,
    runId,
    tool: random.pick(TOOLS),
    input: { item: random.int(1, 1_000_000), version: 0 },
    // A dispatch that never answers may reach the provider until its call deadline, at most the
    // dispatch timeout (docs/contract.md §4.5): 1 s keeps a dead worker's step moving within a cycle.
    policy: {
      max_attempts: random.int(2, 4),
      consistency_window_ms: CONSISTENCY_WINDOW_MS,
      dispatch_timeout_ms: 1_000,
      verification_tool: 'lookup_by_operation_ref',
    },
  };
  const tool = provider.toolFor((_attempt, input) => {
    const behaviour = random.weighted(BEHAVIOURS);
    // A corrected input is not invalid again every time, or correct_input would only ever escalate.
    return behaviour === 'invalid_input' && input.version > 0 ? 'commit' : behaviour;
  });
  const write = async (): Promise<OperationState['status']> => {
    try {
      const outcome: WriteOutcome = await executeWrite(ledger, step, tool);
      return outcome.status;
    } catch (error) {
      // The tool ran but its envelope never reached the ledger: the attempt stays in flight and the
      // runtime verifies it by the same operation_ref (seed: never invent a new key).
      if (error instanceof OutcomeNotRecordedError) return 'dispatched';
      throw error;
    }
  };
  const waitFor = async (instant: string | undefined) => {
    if (!instant) return;
    const ms = Date.parse(instant) - Date.now();
    if (ms > 0) await sleep(Math.min(ms + 15, MAX_WAIT_MS));
  };

  let status = await write();
  for (let round = 0; round < MAX_ROUNDS; round++) {
    switch (status) {
      case 'unplanned':
      case 'planned':
      case 'retry_ready':
        if (random.chance(0.1)) {
          // The worker dies right after the ledger granted the attempt (seed's fault-injection test):
          // the write may or may not have happened, and no envelope ever comes back.
          const state = await ledger.getOperation(ref);
          const attempt = state.attempts_used + 1;
          try {
            await ledger.dispatchAttempt(ref, { attempt, input_hash: inputHash(step.input) });
            if (random.chance(0.5)) provider.commit(ref, attempt);
          } catch (error) {
            if (!(error instanceof LedgerRefusal)) throw error;
          }
          status = (await ledger.getOperation(ref)).status;
        } else {
          status = await write();
        }
        break;
      case 'dispatched': {
        const state = await ledger.getOperation(ref);
        if (random.chance(0.5)) {
          await ledger
            .dispatchAttempt(ref, { attempt: state.attempts_used + 1, input_hash: inputHash(step.input) })
            .catch(refusalOnly);
        }
        const verified = await verify(ledger, { operationRef: ref, tool: step.tool }, provider.lookup);
        if (verified.kind === 'refused') await waitFor(verified.notBefore);
        status = (await ledger.getOperation(ref)).status;
        break;
      }
      case 'verifying': {
        if (random.chance(0.4)) await write();
        const verified = await verify(ledger, { operationRef: ref, tool: step.tool }, provider.lookup);
        if (verified.kind === 'refused') await waitFor(verified.notBefore);
        status = (await ledger.getOperation(ref)).status;
        break;
      }
      case 'needs_input':
        if (random.chance(0.5)) await write();
        step.input = { ...step.input, version: step.input.version + 1 };
        status = await write();
        break;
      case 'retry_scheduled': {
        if (random.chance(0.5)) await write();
        await waitFor((await ledger.getOperation(ref)).not_before);
        status = await write();
        break;
      }
      case 'awaiting_approval':
        if (random.chance(0.3)) await write();
        await ledger
          .recordApproval(ref, { decision: random.chance(0.8) ? 'granted' : 'denied', approver: 'ops@example.com' })
          .catch(refusalOnly);
        status = (await ledger.getOperation(ref)).status;
        break;
      case 'succeeded':
      case 'escalated':
        // A runtime that runs the step again: a succeeded step is replayed, an escalated one refused.
        if (random.chance(0.4)) await write();
        return;
    }
  }
  recorder.anomaly(ref, 'unfinished', `still ${status} after ${MAX_ROUNDS} rounds`);
}

function refusalOnly(error: unknown): void {
  if (!(error instanceof LedgerRefusal)) throw error;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.CHAOS_CLIENT_CONFIG ?? '') as ClientConfig;
  const random = seededRandom(config.seed);
  const recorder = new Recorder(config.recordFile, config.client);
  const clients = config.baseUrls.map(
    (baseUrl) =>
      new LedgerClient({ baseUrl, timeoutMs: 3_000, maxRetries: 2, retryBaseDelayMs: 100, maxRetryDelayMs: 1_000 }),
  );
  const ledger = new RecordingLedger(clients, recorder, config.client, random.fork(1));
  const provider = new SimulatedProvider(recorder, config.client, random.fork(2));
  let stopping = false;
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'stop') stopping = true;
  });
  const runId = `${config.runTag}_c${config.client}`;
  let next = 0;
  let operations = 0;
  const worker = async (index: number) => {
    const workerRandom = random.fork(100 + index);
    while (!stopping) {
      next += 1;
      const ref = `${runId}/step_${next}`;
      operations += 1;
      try {
        await driveOperation(ledger, provider, workerRandom, recorder, ref, runId);
      } catch (error) {
        recorder.anomaly(ref, 'operation_failed', String((error as Error)?.stack ?? error));
      }
    }
  };
  send({ type: 'ready' });
  await Promise.all(Array.from({ length: config.workers }, (_, index) => worker(index)));
  const stats: ClientStats = { client: config.client, operations, ...ledger.stats };
  send({ type: 'done', stats });
  process.disconnect?.();
}

function send(message: ChildMessage): void {
  process.send?.(message);
}

main().catch((error: unknown) => {
  process.stderr.write(`load client failed: ${String((error as Error)?.stack ?? error)}\n`);
  process.exit(1);
});
