/**
 * One call of a write tool through the ledger, the same loop for every host (the MCP gateway, the
 * agent-framework integrations): plan → approval check → executeWrite with the operation_ref as the
 * idempotency key → verify an unknown outcome with the lookup before any new write → answer the
 * envelope's stable fields and agent_message, never upstream prose (docs/contract.md §4,
 * docs/integrations.md). Nothing here records an approval: an approval is an ApprovalRecorded that
 * an approver key submits to the ledger; this loop only reads it.
 */
import { createHash } from 'node:crypto';
import { LedgerAuthError, LedgerError, LedgerNotFound } from './ledger-errors';
import type { OperationState, StepPolicyInput } from './ledger-api.types';
import type { LedgerClient } from './ledger-client';
import {
  executeWrite,
  inputHash,
  OutcomeNotRecordedError,
  runAttempt,
  verify,
  type Lookup,
  type ToolCall,
  type WriteOutcome,
  type WriteStep,
} from './execute-write';
import {
  approvalGateEnvelope,
  checked,
  envelopeForState,
  forStepTool,
  ledgerUnauthorizedEnvelope,
  ledgerUnavailableEnvelope,
  modelText,
  notRecordedEnvelope,
  refReusedEnvelope,
  type AnswerContext,
} from './tool-answer';
import type { ToolEnvelope } from '@recovery-ledger/core/envelope';

/** What the loop needs of the ledger; a LedgerClient is one. */
export type LedgeredToolLedger = Pick<
  LedgerClient,
  | 'planStep'
  | 'dispatchAttempt'
  | 'recordEnvelope'
  | 'recordVerification'
  | 'getEvents'
  | 'recoveryItems'
  | 'getOperation'
>;

export interface LedgeredToolPolicy {
  /** Attempts of the tool itself (an approval request, when asked for, gets one more of its own). */
  max_attempts: number;
  consistency_window_ms: number;
  /** Every dispatch waits for an ApprovalRecorded (granted, for this input) from an approver key. */
  approval_required?: boolean;
}

export interface LedgeredToolRequest<Input> {
  tool: string;
  /** Durable: the same on every retry, resume or replay of this operation (see operationRefFor). */
  operationRef: string;
  runId: string;
  /** What is sent and hashed (no operation_ref, no idempotency key in it). */
  input: Input;
  policy: LedgeredToolPolicy;
  /** Calls the provider once, with context.idempotencyKey as its idempotency key; answers an envelope. */
  call: ToolCall<Input>;
  /** Finds a write by operation_ref at the provider: the only thing that settles an unknown outcome. */
  lookup: Lookup;
  /** Upstream codes the caller vouches for: only these (and the ledger's own) reach the model. */
  vouchedCodes?: readonly string[];
  /** The longest the provider call may stay open (declared to the ledger as call_window_ms). */
  callWindowMs?: number;
  /**
   * How long the loop may wait, in total, for a not_before (a rate limit, a verification that is
   * still premature) before it answers the envelope so the model is told when (default 0: never
   * waits). The model is then never asked to retry what the loop can wait out itself.
   */
  maxWaitMs?: number;
  /** Rounds of verify-then-dispatch one call may take (default 3); each is a ledger decision. */
  maxRounds?: number;
  /**
   * A step left dispatched by another call is verified only once its attempt is this old (default
   * 0: at once; a lookup that finds nothing before the attempt's last reach is refused by the ledger
   * as premature, so verifying early never opens a second write).
   */
  inDoubtAfterMs?: number;
  /** The caller's own call for this ref is still open (the gateway's in-flight set): never verified. */
  inFlight?: (operationRef: string) => boolean;
  /** The name of the verification the envelopes point to (default verify_operation). */
  verificationTool?: string;
  signal?: AbortSignal;
  now?: () => Date;
  /** How the loop waits (default setTimeout, stopped by the signal). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  log?: (line: Record<string, unknown>) => void;
  /**
   * The tool's arguments hold no operation_ref: the caller (a framework integration) keeps the step
   * and chose this ref for it. A call with another input than the step was planned with is then a
   * corrected input of that step (docs/contract.md §4 rules 2 and 4: within its attempts, an
   * approval asked again), not a refusal; and the model is told what such a tool's caller can do.
   */
  stepTool?: boolean;
}

export type LedgeredToolStatus = OperationState['status'] | 'unplanned' | 'unknown';

export interface LedgeredToolResult {
  /** The step's status when the loop answered ('unknown' when the ledger could not say). */
  status: LedgeredToolStatus;
  /** Checked against the envelope contract (an envelope that breaks it becomes an unknown outcome). */
  envelope: ToolEnvelope;
  /** What the model reads: the envelope's stable fields and agent_message, never upstream prose. */
  modelText: string;
  ok: boolean;
  /** An approver must record a grant in the ledger; call again (or resume) after it. */
  approvalPending: boolean;
  notBefore?: string;
  /** Attempts this call got the tool granted (0 when the ledger dispatched nothing). */
  toolCalls: number;
  state?: OperationState;
}

const DEFAULT_ROUNDS = 3;
/** Waits one call may take: each ends at a not_before the ledger set, so a few are plenty. */
const MAX_WAITS = 10;

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The approval is for the input it was asked for (docs/contract.md §4.4); one without a hash
 * predates that. Only an approver key can have recorded it (docs/contract.md §8).
 */
export async function approvalGranted(
  ledger: Pick<LedgerClient, 'getEvents'>,
  operationRef: string,
  hash: string,
): Promise<boolean> {
  try {
    const { events } = await ledger.getEvents(operationRef);
    return events.some(
      (event) =>
        event.type === 'ApprovalRecorded' &&
        event.data.decision === 'granted' &&
        (event.data.input_hash === undefined || event.data.input_hash === hash),
    );
  } catch (error) {
    if (error instanceof LedgerNotFound) return false;
    throw error;
  }
}

/**
 * Runs one call of a write tool through the ledger and answers what the model may read. The tool
 * is dispatched at most once per ledger grant; an unknown outcome is verified by the lookup before
 * any new write; a wait_and_retry is waited out within maxWaitMs; an approval is only read.
 */
export async function callLedgeredTool<Input>(
  ledger: LedgeredToolLedger,
  request: LedgeredToolRequest<Input>,
): Promise<LedgeredToolResult> {
  const now = request.now ?? (() => new Date());
  const sleep = request.sleep ?? defaultSleep;
  const ref = request.operationRef;
  const hash = inputHash(request.input);
  const policy = request.policy;
  const context = (extra: Partial<AnswerContext> = {}): AnswerContext => ({
    vouched: request.vouchedCodes ?? [],
    now: now(),
    ...extra,
  });
  const stepPolicy: StepPolicyInput = {
    // The approval request is attempt 1 when the policy asks for one: it needs an attempt of its own.
    max_attempts: policy.max_attempts + (policy.approval_required ? 1 : 0),
    consistency_window_ms: policy.consistency_window_ms,
    verification_tool: request.verificationTool ?? 'verify_operation',
  };
  const step: WriteStep<Input> = {
    operationRef: ref,
    runId: request.runId,
    tool: request.tool,
    input: request.input,
    inputHash: hash,
    policy: stepPolicy,
  };
  const waitUntil = now().getTime() + Math.max(0, request.maxWaitMs ?? 0);
  let toolCalls = 0;
  let waits = 0;
  const answer = (envelope: ToolEnvelope, state: OperationState | undefined): LedgeredToolResult => {
    const sure = request.stepTool ? forStepTool(checked(envelope)) : checked(envelope);
    return {
      status: state?.status ?? 'unknown',
      envelope: sure,
      modelText: modelText(request.tool, sure, { stepTool: request.stepTool === true }),
      ok: sure.ok,
      approvalPending: !sure.ok && sure.next_action === 'request_approval',
      ...(!sure.ok && sure.retry.not_before ? { notBefore: sure.retry.not_before } : {}),
      toolCalls,
      ...(state ? { state } : {}),
    };
  };

  try {
    const rounds = request.maxRounds ?? DEFAULT_ROUNDS;
    for (let round = 0; round < rounds;) {
      const approved = policy.approval_required ? await approvalGranted(ledger, ref, hash) : true;
      const call: ToolCall<Input> = async (input, callContext) => {
        // The policy's gate: the attempt is recorded as a request for approval, and nothing is sent.
        if (!approved) return approvalGateEnvelope(callContext.operationRef);
        toolCalls++;
        return request.call(input, callContext);
      };
      const options = {
        now,
        ...(request.callWindowMs === undefined ? {} : { callWindowMs: request.callWindowMs }),
        ...(request.signal ? { signal: request.signal } : {}),
      };
      let outcome = await executeWrite(ledger, step, call, options);
      const planned = outcome.state;
      if (
        request.stepTool &&
        outcome.kind === 'refused' &&
        outcome.refusal?.code === 'OPERATION_REF_REUSED' &&
        planned?.run_id === request.runId &&
        planned.tool === request.tool &&
        planned.side_effect === 'write'
      ) {
        // The step the caller keeps, asked with another input: its next attempt, which the ledger
        // gates like any other (in flight, unverified, bounded, approved for this input or asked again).
        outcome = await runAttempt(
          ledger,
          {
            operationRef: ref,
            attempt: planned.attempts_used + 1,
            inputHash: hash,
            input: request.input,
            sideEffect: 'write',
            tool: request.tool,
          },
          call,
          options,
        );
      }
      const settled = await settle(ledger, request, outcome, context, now);
      if (settled.again) {
        round++;
        continue;
      }
      const envelope = settled.envelope;
      // A wait the loop can take itself is not the model's to take (docs/integrations.md, "Waits").
      const until = !envelope.ok && envelope.retry.not_before ? Date.parse(envelope.retry.not_before) : NaN;
      const waitable =
        !envelope.ok &&
        (envelope.next_action === 'wait_and_retry' ||
          (envelope.next_action === 'verify_operation' && envelope.commit_state === 'unknown')) &&
        Number.isFinite(until) &&
        until <= waitUntil;
      if (waitable && waits++ < MAX_WAITS) {
        request.log?.({
          event: 'waiting',
          operation_ref: ref,
          code: envelope.code,
          not_before: envelope.retry.not_before,
        });
        await sleep(Math.max(0, until - now().getTime()) + 1, request.signal);
        continue;
      }
      return answer(envelope, settled.state);
    }
    const state = await ledger.getOperation(ref);
    return answer(envelopeForState(state, context()), state);
  } catch (error) {
    if (error instanceof OutcomeNotRecordedError) return answer(notRecordedEnvelope(ref), undefined);
    if (error instanceof LedgerAuthError) return answer(ledgerUnauthorizedEnvelope(ref), undefined);
    if (error instanceof LedgerError)
      return answer(ledgerUnavailableEnvelope(ref, now(), error.retryAfterSeconds), undefined);
    throw error;
  }
}

type Settled = { again: true } | { again: false; envelope: ToolEnvelope; state?: OperationState };

/**
 * What executeWrite's outcome becomes for the model. An unknown outcome, or a step left in doubt
 * by an earlier call or an earlier life, is verified here first; `again` asks for one more round
 * when the verification proved nothing was written and the ledger allows a new attempt.
 */
async function settle<Input>(
  ledger: LedgeredToolLedger,
  request: LedgeredToolRequest<Input>,
  outcome: WriteOutcome,
  context: (extra?: Partial<AnswerContext>) => AnswerContext,
  now: () => Date,
): Promise<Settled> {
  const ref = outcome.operationRef;
  if (outcome.kind === 'refused' && outcome.refusal?.code === 'OPERATION_REF_REUSED')
    return { again: false, envelope: refReusedEnvelope(ref), state: outcome.state };
  if (!outcome.state) return { again: false, envelope: notRecordedEnvelope(ref) };
  const state = outcome.state;
  const inDoubt = state.status === 'verifying' || state.status === 'dispatched';
  const justUnknown = outcome.kind === 'recorded' && state.status === 'verifying';
  const since = state.since ? Date.parse(state.since) : NaN;
  const oldEnough = Number.isNaN(since) || now().getTime() - since >= (request.inDoubtAfterMs ?? 0);
  const leftInDoubt =
    outcome.kind === 'refused' && !outcome.toolCalled && inDoubt && !request.inFlight?.(ref) && oldEnough;
  if (justUnknown || leftInDoubt) {
    const verified = await verify(ledger, { operationRef: ref, tool: request.tool }, request.lookup, { now });
    request.log?.({
      event: 'verified',
      operation_ref: ref,
      outcome: verified.outcome,
      status: verified.status,
      refusal: verified.refusal?.code,
    });
    // Proven not written, found by a check asked for by calling again: send it again.
    if (verified.status === 'retry_ready' && leftInDoubt) return { again: true };
    const after = verified.state ?? state;
    return {
      again: false,
      envelope: envelopeForState(
        after,
        context({
          refusal: verified.refusal?.code,
          directive: verified.refusal ? verified.directive : undefined,
        }),
      ),
      state: after,
    };
  }
  if (outcome.kind === 'refused' && outcome.toolCalled) {
    // The tool ran but the ledger would not take its envelope: only a lookup can say what happened.
    return { again: false, envelope: notRecordedEnvelope(ref), state };
  }
  return {
    again: false,
    envelope: envelopeForState(
      state,
      context({
        refusal: outcome.kind === 'refused' ? outcome.refusal?.code : undefined,
        recorded: outcome.envelope,
        directive: outcome.kind === 'refused' ? outcome.directive : undefined,
      }),
    ),
    state,
  };
}

export interface OperationRefParts {
  /** The run (task, thread, conversation) the agent works on: stable across restarts of it. */
  runId: string;
  tool: string;
  /**
   * A name the caller chose for the step, stable when the framework retries, resumes or replays it
   * (a step id of the application, a user turn's id). Never a model-generated tool-call id alone.
   */
  key?: string;
  /** The step's ordinal within the run and tool (the framework integrations count their steps). */
  step?: number;
  /** The input, when it is what tells two operations apart (its canonical hash goes in the ref). */
  input?: unknown;
}

/** The longest operation_ref the ledger and the gateway take. */
export const MAX_OPERATION_REF_LENGTH = 200;

/** Kept as they are: the identifier grammar's characters (packages/core/src/domain/identifier-grammar.ts) but `/` and `~`. */
const KEPT = /^[A-Za-z0-9_.:@+=#-]$/;

/**
 * One part of a ref, reversibly: a kept character as it is, any other UTF-16 unit as `~` and two
 * hex digits (up to U+00FF) or `~u` and four. No part holds a `/` afterwards, so the parts of a ref
 * can be told apart, and no part holds `~h` (the mark of a hashed ref).
 */
function encodePart(text: string): string {
  let out = '';
  for (let index = 0; index < text.length; index++) {
    const char = text[index];
    const unit = text.charCodeAt(index);
    if (unit < 0x80 && KEPT.test(char)) out += char;
    else if (unit <= 0xff) out += `~${unit.toString(16).padStart(2, '0')}`;
    else out += `~u${unit.toString(16).padStart(4, '0')}`;
  }
  return out;
}

/**
 * The operation_ref of a step: `<run>/<tool>[/k.<key>][/s.<step>][/<first 32 hex of the input's
 * canonical hash>]`, each part encoded (encodePart). Injective: two different sets of parts never
 * share a ref (the encoding is reversible, and a ref longer than 200 characters keeps its first
 * 134 and adds `~h` and the SHA-256 of the whole). Every ref follows the identifier grammar
 * (packages/core/src/domain/identifier-grammar.ts): a run whose encoding starts with anything but a
 * letter or digit gets a leading `_` (docs/integrations.md, "The operation_ref rule").
 */
export function operationRefFor(parts: OperationRefParts): string {
  if (parts.step !== undefined && (!Number.isSafeInteger(parts.step) || parts.step < 0)) {
    throw new RangeError(`step must be a non-negative integer, got ${parts.step}`);
  }
  const run = encodePart(parts.runId);
  const segments = [
    /^[A-Za-z0-9]/.test(run) ? run : `_${run}`,
    encodePart(parts.tool),
    ...(parts.key === undefined ? [] : [`k.${encodePart(parts.key)}`]),
    ...(parts.step === undefined ? [] : [`s.${parts.step}`]),
    ...(parts.input === undefined ? [] : [inputHash(parts.input).slice(0, 32)]),
  ];
  const ref = segments.join('/');
  if (ref.length <= MAX_OPERATION_REF_LENGTH) return ref;
  const digest = createHash('sha256').update(ref).digest('hex');
  return `${ref.slice(0, MAX_OPERATION_REF_LENGTH - digest.length - 2)}~h${digest}`;
}
