import { createHash } from 'node:crypto';
import {
  canonicalJson,
  DEFAULT_ENVELOPE_LIMITS,
  type EnvelopeLimits,
  type ToolEnvelope,
  validateEnvelope,
} from '@recovery-ledger/core/envelope';
import type {
  Directive,
  OperationState,
  SideEffect,
  StepPolicyInput,
  SubmitAnswer,
  VerificationOutcome,
  VerificationRecordedInput,
} from './ledger-api.types';
import { bindCallWindow, type CallWindow } from './call-window';
import type { LedgerClient, RequestOptions } from './ledger-client';
import { LedgerError, LedgerRefusal } from './ledger-errors';
import { callWindowPassed, escalate, uncertainOutcome, type NormalizeContext } from './normalizers/envelope-builders';
import { normalizeNetworkError } from './normalizers/network-error.normalizer';
import { inToolSpan, keyedHash } from './telemetry';

/** What executeWrite, verify and recover need of the ledger; a LedgerClient is one. */
export type LedgerApi = Pick<
  LedgerClient,
  'planStep' | 'dispatchAttempt' | 'recordEnvelope' | 'recordVerification' | 'getEvents' | 'recoveryItems'
>;

export interface WriteStep<Input = unknown> {
  /** Durable, chosen before the first attempt, and the provider's idempotency key on every attempt. */
  operationRef: string;
  runId: string;
  tool: string;
  input: Input;
  /** `write` unless the tool only reads. */
  sideEffect?: SideEffect;
  policy?: StepPolicyInput;
  /** The canonical hash of `input`, unless the runtime has its own (see inputHash()). */
  inputHash?: string;
}

export interface ToolCallContext {
  operationRef: string;
  /** Give this to the provider as its idempotency key: it is the same on every attempt of the step. */
  idempotencyKey: string;
  /** The attempt the ledger granted (1 for the first). */
  attempt: number;
  sideEffect: SideEffect;
  /**
   * The runtime's cancellation, and the end of the attempt's call window (it aborts with a
   * TimeoutError when the window minus its margin has passed): give it to the request, so no byte
   * of this attempt leaves after the ledger's call deadline. A tool that stops after its request
   * may have left answers an envelope like any failure; the SDK still records it.
   */
  signal?: AbortSignal;
  /**
   * The attempt's call window: its call deadline (send it to the provider as `Ledger-Call-Deadline`)
   * and `open()`, the SDK's check, to make again right before the request's bytes go to the socket
   * (callHttpTool does both; docs/reliability.md "How close the check sits to the write").
   */
  callWindow?: CallWindow;
}

/**
 * Calls the tool once and answers its envelope (see the normalizers for turning HTTP answers or
 * MCP results into one). A throw is treated as a network failure of the call.
 */
export type ToolCall<Input> = (input: Input, context: ToolCallContext) => Promise<unknown>;

export interface ExecuteOptions extends Pick<RequestOptions, 'traceparent' | 'tracestate' | 'lease'> {
  /**
   * Stops the work before the gate (nothing dispatched, an AbortError thrown) and is handed to the
   * tool; once an attempt is granted its envelope is always recorded, so a step is never left
   * silently in flight by an abort.
   */
  signal?: AbortSignal;
  /** The runtime's clock, for the envelopes it writes (the ledger judges time by its own). */
  now?: () => Date;
  /** The limits the ledger validates envelopes with. */
  limits?: EnvelopeLimits;
  /** For the envelope a thrown tool call becomes. */
  normalize?: Pick<NormalizeContext, 'maxAttemptsRemaining' | 'defaultRetryDelayMs' | 'verificationTool'>;
  /**
   * The longest the tool call may stay open, declared to the ledger with the dispatch
   * (`call_window_ms`, an integer 1..86_400_000): the attempt's call deadline is at most this long
   * after the grant. The SDK holds its own call to the same window even when the ledger does not
   * answer a deadline.
   */
  callWindowMs?: number;
}

/** The longest call window a dispatcher may declare (docs/contract.md §4.5): a day. */
export const MAX_CALL_WINDOW_MS = 86_400_000;
/** The dispatcher's margin inside its window: 10 % of it, and never less than this. */
export const MIN_CALL_MARGIN_MS = 50;
export const CALL_MARGIN_FRACTION = 0.1;

/**
 * How long before the end of its call window a dispatcher stops starting (and aborts) its call:
 * 10 % of the window, at least 50 ms. It covers the rate difference of two monotonic clocks and the
 * time between the check and the request's bytes leaving (docs/reliability.md "When an attempt
 * may still reach the provider").
 */
export function callMarginMs(windowMs: number): number {
  return Math.max(MIN_CALL_MARGIN_MS, windowMs * CALL_MARGIN_FRACTION);
}

/**
 * The granted attempt's call window, in ms: the ledger's call deadline minus its grant instant
 * (`since`), bounded by what the dispatcher declared. Undefined when neither is known (a ledger
 * that answers no call deadline, and no window declared): the call is then not bounded here.
 */
export function callWindowOf(
  state: Pick<OperationState, 'call_deadline' | 'since'>,
  declaredMs?: number,
): number | undefined {
  const deadline = state.call_deadline === undefined ? Number.NaN : Date.parse(state.call_deadline);
  const since = state.since === undefined ? Number.NaN : Date.parse(state.since);
  const granted = Number.isFinite(deadline) && Number.isFinite(since) ? Math.max(0, deadline - since) : undefined;
  if (granted === undefined) return declaredMs;
  return declaredMs === undefined ? granted : Math.min(granted, declaredMs);
}

function checkCallWindow(ms: number | undefined): void {
  if (ms === undefined) return;
  if (!Number.isInteger(ms) || ms < 1 || ms > MAX_CALL_WINDOW_MS) {
    throw new RangeError(`callWindowMs must be an integer from 1 to ${MAX_CALL_WINDOW_MS}, got ${ms}`);
  }
}

export type WriteOutcomeKind =
  /** The tool ran once and its envelope is recorded; `directive` is what the ledger decided. */
  | 'recorded'
  /** The ledger refused: before a dispatch, the tool was not called; after it, see `refusal`. */
  | 'refused'
  /** The step had already succeeded: the original success stands and the tool was not called. */
  | 'replayed';

export interface WriteOutcome {
  kind: WriteOutcomeKind;
  operationRef: string;
  status: OperationState['status'];
  /** What the caller's scheduler does next; executeWrite itself never waits or retries. */
  directive: Directive;
  /** When the next attempt or check may run, for the caller's scheduler. */
  notBefore?: string;
  toolCalled: boolean;
  attempt?: number;
  /** The envelope recorded for the attempt (normalized and validated). */
  envelope?: ToolEnvelope;
  refusal?: { code: string; detail: string };
  /** For `replayed`: the original success, as the ledger proved it. */
  success?: unknown;
  state?: OperationState;
  /** The envelope ended the step under the worker's lease, and the ledger gave the lease back. */
  leaseReleased?: boolean;
}

/**
 * The tool ran but its envelope could not be recorded (the ledger was unreachable after the
 * client's retries). The ledger still shows the attempt in flight, so nothing will dispatch it
 * again: recover() verifies it by operation_ref, as after a crash.
 */
export class OutcomeNotRecordedError extends Error {
  constructor(
    readonly operationRef: string,
    readonly attempt: number,
    readonly envelope: ToolEnvelope,
    cause: unknown,
  ) {
    super(`the envelope of ${operationRef} attempt ${attempt} was not recorded; recover() will verify it`, { cause });
    this.name = 'OutcomeNotRecordedError';
  }
}

/** SHA-256 of the input's canonical JSON: equal inputs hash equal in any process, key order aside. */
export function inputHash(input: unknown): string {
  return createHash('sha256').update(canonicalJson(input)).digest('hex');
}

function refusedOutcome(operationRef: string, error: LedgerRefusal, extra: Partial<WriteOutcome>): WriteOutcome {
  const directive = error.directive ?? { next_action: 'none', attempts_remaining: 0 };
  return {
    kind: 'refused',
    operationRef,
    status: error.state?.status ?? 'unplanned',
    directive,
    ...(directive.not_before ? { notBefore: directive.not_before } : {}),
    toolCalled: false,
    refusal: { code: error.code, detail: error.detail },
    ...(error.state ? { state: error.state } : {}),
    ...extra,
  };
}

function answeredOutcome(operationRef: string, answer: SubmitAnswer, extra: Partial<WriteOutcome>): WriteOutcome {
  return {
    kind: 'recorded',
    operationRef,
    status: answer.state.status,
    directive: answer.directive,
    ...(answer.directive.not_before ? { notBefore: answer.directive.not_before } : {}),
    toolCalled: false,
    state: answer.state,
    ...(answer.lease_released ? { leaseReleased: true } : {}),
    ...extra,
  };
}

/**
 * Whether the input can travel with its hash: the ledger records an input only when the hash is its
 * canonical SHA-256 (a runtime with its own inputHash sends the hash alone).
 */
function recordable(step: WriteStep<unknown>, hash: string): boolean {
  if (step.inputHash === undefined) return true;
  try {
    return inputHash(step.input) === hash;
  } catch {
    return false;
  }
}

/**
 * Sends the fact with the input, so an approver reads the input itself, not a hash
 * (docs/contract.md §4.4); again without it when the ledger refuses to store that input (it looks
 * like it holds a secret, or is over its size bound): nothing was recorded, and the step then runs
 * on its hash alone, the approver told plainly that the input was not recorded.
 */
async function withInputIfStored<T>(send: (withInput: boolean) => Promise<T>, withInput: boolean): Promise<T> {
  if (!withInput) return send(false);
  try {
    return await send(true);
  } catch (error) {
    const inputRefused =
      error instanceof LedgerError && error.code === 'BAD_REQUEST' && /\.data\.input$/.test(error.field ?? '');
    if (inputRefused) return send(false);
    throw error;
  }
}

/**
 * The same operation_ref planned with another input is refused (OPERATION_REF_REUSED), except in
 * the one case it is the contract's flow: the step asked for corrected input and this is it. That is
 * so while the step is in needs_input, when the step asks approval for this input (a corrected
 * input refused until approved), or when the ledger already granted a dispatch with this input
 * hash (the correction was accepted earlier, and a later failure brought the caller back).
 */
async function isCorrectedInput(
  ledger: LedgerApi,
  step: WriteStep<unknown>,
  sideEffect: SideEffect,
  hash: string,
  refusal: LedgerRefusal,
  options: ExecuteOptions,
): Promise<boolean> {
  const state = refusal.state;
  if (!state || state.run_id !== step.runId || state.tool !== step.tool || state.side_effect !== sideEffect)
    return false;
  if (state.status === 'needs_input') return true;
  // The ledger asked approval for this very input (docs/contract.md §4.4): the gate decides on it.
  if (state.approval_input_hash === hash) return true;
  const { events } = await ledger.getEvents(step.operationRef, options);
  return events.some((event) => event.type === 'AttemptDispatched' && event.data.input_hash === hash);
}

/**
 * The contract's executeWrite as one call: plan the step (idempotent), ask the ledger to dispatch (the
 * AttemptDispatched submit is the gate), call the tool with operation_ref as its idempotency key,
 * record its envelope, and answer the ledger's directive.
 *
 * - The tool is called only when the ledger granted this very attempt; a refusal returns, tool uncalled.
 * - Nothing here retries or waits: verify_operation, request_approval and escalate come back as
 *   directives, and wait_and_retry comes back with `notBefore` for the caller's scheduler.
 * - A thrown tool call becomes an envelope through the network-error normalizer: after the
 *   request may have left, a write's outcome is unknown and must be verified.
 * - Calling it again for the same step is safe: a succeeded step is replayed, never rerun.
 *
 * Ledger errors other than refusals (unreachable, unauthorized) are thrown; before the tool ran
 * nothing happened, after it the error is an OutcomeNotRecordedError.
 */
export async function executeWrite<Input>(
  ledger: LedgerApi,
  step: WriteStep<Input>,
  toolCall: ToolCall<Input>,
  options: ExecuteOptions = {},
): Promise<WriteOutcome> {
  return inToolSpan(step.tool, options, spanAttributes(step.operationRef, step.sideEffect ?? 'write'), {
    run: (trace) => planAndRun(ledger, step, toolCall, { ...options, ...trace }),
    describe: describeWrite,
  });
}

/** The span attributes of a tool call that tell what happened; never the operation_ref itself. */
function spanAttributes(ref: string, sideEffect: SideEffect): Record<string, string> {
  return { 'recovery_ledger.operation_ref_hash': keyedHash(ref), 'recovery_ledger.side_effect': sideEffect };
}

function describeWrite(outcome: WriteOutcome): Record<string, string | number | boolean | undefined> {
  const envelope = outcome.envelope;
  const failed = outcome.refusal?.code ?? (envelope && !envelope.ok ? envelope.code : undefined);
  return {
    'recovery_ledger.outcome': outcome.kind,
    'recovery_ledger.status': outcome.status,
    'recovery_ledger.next_action': outcome.directive.next_action,
    'recovery_ledger.tool_called': outcome.toolCalled,
    ...(outcome.attempt === undefined ? {} : { 'recovery_ledger.attempt': outcome.attempt }),
    ...(envelope ? { 'recovery_ledger.commit_state': envelope.commit_state } : {}),
    ...(outcome.refusal ? { 'recovery_ledger.refusal_code': outcome.refusal.code } : {}),
    ...(failed === undefined ? {} : { 'error.type': failed }),
  };
}

async function planAndRun<Input>(
  ledger: LedgerApi,
  step: WriteStep<Input>,
  toolCall: ToolCall<Input>,
  options: ExecuteOptions,
): Promise<WriteOutcome> {
  const sideEffect = step.sideEffect ?? 'write';
  const hash = step.inputHash ?? inputHash(step.input);
  const ref = step.operationRef;
  const trace = {
    traceparent: options.traceparent,
    tracestate: options.tracestate,
    ...(options.lease ? { lease: options.lease } : {}),
  };
  // The plan may be stopped half-way (a plan is idempotent); the dispatch is not (see runAttempt).
  const gate = { ...trace, signal: options.signal };
  options.signal?.throwIfAborted();

  const withInput = recordable(step, hash);
  let planned: OperationState;
  // A corrected input is not the plan's: its dispatch carries it instead.
  let corrected = false;
  try {
    const answer = await withInputIfStored(
      (sendInput) =>
        ledger.planStep(
          ref,
          {
            run_id: step.runId,
            tool: step.tool,
            side_effect: sideEffect,
            input_hash: hash,
            ...(sendInput ? { input: step.input } : {}),
            ...(step.policy ? { policy: step.policy } : {}),
          },
          gate,
        ),
      withInput,
    );
    planned = answer.state;
  } catch (error) {
    if (!(error instanceof LedgerRefusal)) throw error;
    corrected =
      error.code === 'OPERATION_REF_REUSED' && (await isCorrectedInput(ledger, step, sideEffect, hash, error, gate));
    if (!corrected || !error.state) return refusedOutcome(ref, error, {});
    planned = error.state;
  }

  return attemptOnce(
    ledger,
    {
      operationRef: ref,
      attempt: planned.attempts_used + 1,
      inputHash: hash,
      input: step.input,
      sideEffect,
      ...(corrected && withInput ? { recordInput: true } : {}),
    },
    toolCall,
    options,
  );
}

export interface AttemptToRun<Input> {
  operationRef: string;
  /** The attempt to ask the gate for: the attempts granted so far plus one. */
  attempt: number;
  inputHash: string;
  input: Input;
  sideEffect: SideEffect;
  /** The tool's name, for the `execute_tool {tool}` span. */
  tool?: string;
  /** Send the input with the dispatch: a corrected input, which the plan does not carry (§4.4). */
  recordInput?: boolean;
}

/**
 * One attempt of a planned step: the gate, the tool with operation_ref as its idempotency key,
 * the envelope recorded. executeWrite runs it after planning; the worker runs it for a dispatch
 * item of the work feed, whose attempt and input hash the ledger gave.
 *
 * The dispatcher's duty (docs/reliability.md "When an attempt may still reach the provider"): the
 * call starts only while less than the granted window minus its margin has passed since the
 * dispatch request was sent (a monotonic clock), and the tool's signal aborts when it has. A window
 * found gone is not used: the tool is not called and a CALL_WINDOW_PASSED envelope is recorded.
 */
export async function runAttempt<Input>(
  ledger: LedgerApi,
  run: AttemptToRun<Input>,
  toolCall: ToolCall<Input>,
  options: ExecuteOptions = {},
): Promise<WriteOutcome> {
  return inToolSpan(run.tool ?? 'unnamed', options, spanAttributes(run.operationRef, run.sideEffect), {
    run: (trace) => attemptOnce(ledger, run, toolCall, { ...options, ...trace }),
    describe: describeWrite,
  });
}

async function attemptOnce<Input>(
  ledger: LedgerApi,
  run: AttemptToRun<Input>,
  toolCall: ToolCall<Input>,
  options: ExecuteOptions,
): Promise<WriteOutcome> {
  const now = options.now ?? (() => new Date());
  const { operationRef: ref, attempt, sideEffect } = run;
  const trace = {
    traceparent: options.traceparent,
    tracestate: options.tracestate,
    ...(options.lease ? { lease: options.lease } : {}),
  };
  checkCallWindow(options.callWindowMs);
  options.signal?.throwIfAborted();
  let granted: SubmitAnswer;
  // Before the request leaves, so before the ledger's grant: the window is counted from here, on a
  // clock no wall-clock step moves (docs/reliability.md "When an attempt may still reach the provider").
  const sentAt = performance.now();
  try {
    // Not aborted half-way: a dispatch granted but never answered would leave the step in flight.
    granted = await withInputIfStored(
      (sendInput) =>
        ledger.dispatchAttempt(
          ref,
          {
            attempt,
            input_hash: run.inputHash,
            ...(sendInput ? { input: run.input } : {}),
            ...(options.callWindowMs === undefined ? {} : { call_window_ms: options.callWindowMs }),
          },
          trace,
        ),
      run.recordInput === true,
    );
  } catch (error) {
    if (error instanceof LedgerRefusal) return refusedOutcome(ref, error, { attempt });
    throw error;
  }
  if (granted.replayed) {
    return answeredOutcome(ref, granted, { kind: 'replayed', success: granted.success });
  }
  // Only this very attempt, in flight, lets the tool run.
  if (granted.state.status !== 'dispatched' || granted.state.current_attempt !== attempt) {
    return answeredOutcome(ref, granted, {
      kind: 'refused',
      attempt,
      refusal: { code: 'ATTEMPT_MISMATCH', detail: `the ledger did not put attempt ${attempt} in flight` },
    });
  }

  const context: NormalizeContext = { operationRef: ref, sideEffect, now: now(), ...options.normalize };
  const windowMs = callWindowOf(granted.state, options.callWindowMs);
  const callBy = windowMs === undefined ? undefined : sentAt + windowMs - callMarginMs(windowMs);
  if (callBy !== undefined && performance.now() >= callBy) {
    // Paused past the window (GC, a VM stop): the ledger may already take this attempt for one that
    // never happened, so the tool is not called, and the envelope says so.
    const envelope = callWindowPassed({ ...context, now: now() });
    return recordOutcome(ledger, ref, attempt, envelope, { ...context, now: now() }, trace, false);
  }
  const window = callBy === undefined ? undefined : windowSignal(callBy - performance.now());
  const signals = [options.signal, window?.signal].filter((signal): signal is AbortSignal => signal !== undefined);
  const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
  const deadline = granted.state.call_deadline;
  const callWindow: CallWindow | undefined =
    callBy === undefined
      ? undefined
      : { ...(deadline === undefined ? {} : { deadline }), open: () => performance.now() < callBy };
  if (signal && callWindow) bindCallWindow(signal, callWindow);
  let raw: unknown;
  try {
    raw = await toolCall(run.input, {
      operationRef: ref,
      idempotencyKey: ref,
      attempt,
      sideEffect,
      ...(signal ? { signal } : {}),
      ...(callWindow ? { callWindow } : {}),
    });
  } catch (error) {
    raw = normalizeNetworkError(error, { ...context, now: now() });
  } finally {
    window?.clear();
  }
  const envelope = checkedEnvelope(raw, { ...context, now: now() }, options.limits);
  return recordOutcome(ledger, ref, attempt, envelope, { ...context, now: now() }, trace, true);
}

/** A signal that aborts, with a TimeoutError, once the call window minus its margin has passed. */
function windowSignal(ms: number): { signal: AbortSignal; clear: () => void } {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException('the call window the ledger granted has passed', 'TimeoutError')),
    Math.max(0, ms),
  );
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}

/**
 * The envelope as the ledger will validate it. One that breaks the rules is not sent as it is: the
 * tool did run, so for a write the outcome is unknown (verify), and for a read a person looks.
 */
function checkedEnvelope(raw: unknown, context: NormalizeContext, limits: EnvelopeLimits | undefined): ToolEnvelope {
  const checked = validateEnvelope(
    raw,
    { operationRef: context.operationRef, sideEffect: context.sideEffect },
    limits ?? DEFAULT_ENVELOPE_LIMITS,
  );
  if (checked.ok) return checked.envelope;
  return substituteEnvelope(context);
}

function substituteEnvelope(context: NormalizeContext): ToolEnvelope {
  return context.sideEffect === 'write'
    ? uncertainOutcome(context, 'TOOL_RESULT_INVALID')
    : escalate(context, 'TOOL_RESULT_INVALID', 'internal');
}

async function recordOutcome(
  ledger: LedgerApi,
  ref: string,
  attempt: number,
  envelope: ToolEnvelope,
  context: NormalizeContext,
  trace: RequestOptions,
  toolCalled: boolean,
): Promise<WriteOutcome> {
  try {
    const answer = await ledger.recordEnvelope(ref, { attempt, envelope }, trace);
    return answeredOutcome(ref, answer, { toolCalled, attempt, envelope });
  } catch (error) {
    if (error instanceof LedgerRefusal) return refusedOutcome(ref, error, { toolCalled, attempt, envelope });
    // The ledger's limits may be stricter than ours (its safe_details keys are configurable): record
    // the envelope that claims nothing rather than leave the attempt without an outcome.
    if (error instanceof LedgerError && error.code === 'ENVELOPE_INVALID') {
      const substitute = substituteEnvelope(context);
      try {
        const answer = await ledger.recordEnvelope(ref, { attempt, envelope: substitute }, trace);
        return answeredOutcome(ref, answer, { toolCalled, attempt, envelope: substitute });
      } catch (second) {
        if (second instanceof LedgerRefusal) {
          return refusedOutcome(ref, second, { toolCalled, attempt, envelope: substitute });
        }
        throw new OutcomeNotRecordedError(ref, attempt, substitute, second);
      }
    }
    throw new OutcomeNotRecordedError(ref, attempt, envelope, error);
  }
}

// ---- verification ------------------------------------------------------------------------------------

/** What a lookup by operation_ref found. `found` needs evidence: the provider's id of the write. */
export type LookupResult = { found: true; evidenceRef: string; result?: unknown } | { found: false };

/** Reads the provider by operation_ref (the idempotency key the write carried); throws when it cannot. */
export type Lookup = (operationRef: string, context: { tool?: string; signal?: AbortSignal }) => Promise<LookupResult>;

export interface VerifyStep {
  operationRef: string;
  tool?: string;
}

export interface VerifyOutcome {
  kind: 'recorded' | 'refused';
  operationRef: string;
  outcome: VerificationOutcome;
  status: OperationState['status'];
  directive: Directive;
  /** For a premature not_found: when the consistency window ends and the check may run again. */
  notBefore?: string;
  evidenceRef?: string;
  refusal?: { code: string; detail: string };
  state?: OperationState;
}

function verificationOf(result: unknown, checkedAt: string): VerificationRecordedInput {
  const record = result as Partial<Record<string, unknown>> | null;
  if (record && typeof record === 'object' && record.found === false)
    return { outcome: 'not_found', checked_at: checkedAt };
  if (
    record &&
    typeof record === 'object' &&
    record.found === true &&
    typeof record.evidenceRef === 'string' &&
    record.evidenceRef !== ''
  ) {
    return {
      outcome: 'found_committed',
      checked_at: checkedAt,
      evidence_ref: record.evidenceRef,
      ...(record.result === undefined ? {} : { result: record.result }),
    };
  }
  // A lookup answer that is neither is no answer: never guess (seed).
  return { outcome: 'lookup_unavailable', checked_at: checkedAt };
}

/**
 * Runs the verification lookup by the step's own operation_ref and records what it found:
 * found_committed (with evidence), not_found, or lookup_unavailable when the lookup throws or
 * answers nonsense. The ledger decides what follows; a not_found inside the consistency window is
 * refused with the instant it ends, which comes back as `notBefore` (nothing here waits).
 */
export async function verify(
  ledger: LedgerApi,
  step: VerifyStep,
  lookup: Lookup,
  options: VerifyOptions = {},
): Promise<VerifyOutcome> {
  return inToolSpan(
    step.tool ?? 'unnamed',
    options,
    { ...spanAttributes(step.operationRef, 'read'), 'recovery_ledger.phase': 'verify' },
    {
      run: (trace) => verifyOnce(ledger, step, lookup, { ...options, ...trace }),
      describe: (verified) => ({
        'recovery_ledger.verification': verified.outcome,
        'recovery_ledger.status': verified.status,
        'recovery_ledger.next_action': verified.directive.next_action,
        ...(verified.refusal ? { 'recovery_ledger.refusal_code': verified.refusal.code } : {}),
        ...(verified.outcome === 'lookup_unavailable'
          ? { 'error.type': 'lookup_unavailable' }
          : verified.refusal
            ? { 'error.type': verified.refusal.code }
            : {}),
      }),
    },
  );
}

type VerifyOptions = Pick<ExecuteOptions, 'now' | 'traceparent' | 'tracestate' | 'lease' | 'signal'>;

async function verifyOnce(
  ledger: LedgerApi,
  step: VerifyStep,
  lookup: Lookup,
  options: VerifyOptions,
): Promise<VerifyOutcome> {
  const now = options.now ?? (() => new Date());
  const ref = step.operationRef;
  // An abort stops a check that has not started; a lookup that answered is always recorded.
  options.signal?.throwIfAborted();
  let data: VerificationRecordedInput;
  options.signal?.throwIfAborted();
  try {
    const found = await lookup(ref, { tool: step.tool, ...(options.signal ? { signal: options.signal } : {}) });
    data = verificationOf(found, now().toISOString());
  } catch (error) {
    // The caller stopping is not the lookup failing: recording lookup_unavailable would escalate.
    if (options.signal?.aborted) throw error;
    data = { outcome: 'lookup_unavailable', checked_at: now().toISOString() };
  }
  const evidence = data.evidence_ref ? { evidenceRef: data.evidence_ref } : {};
  try {
    const answer = await ledger.recordVerification(ref, data, {
      traceparent: options.traceparent,
      tracestate: options.tracestate,
      signal: options.signal,
      ...(options.lease ? { lease: options.lease } : {}),
    });
    return {
      kind: 'recorded',
      operationRef: ref,
      outcome: data.outcome,
      status: answer.state.status,
      directive: answer.directive,
      ...(answer.directive.not_before ? { notBefore: answer.directive.not_before } : {}),
      ...evidence,
      state: answer.state,
    };
  } catch (error) {
    if (!(error instanceof LedgerRefusal)) throw error;
    const directive = error.directive ?? { next_action: 'none', attempts_remaining: 0 };
    return {
      kind: 'refused',
      operationRef: ref,
      outcome: data.outcome,
      status: error.state?.status ?? 'unplanned',
      directive,
      ...(directive.not_before ? { notBefore: directive.not_before } : {}),
      ...evidence,
      refusal: { code: error.code, detail: error.detail },
      ...(error.state ? { state: error.state } : {}),
    };
  }
}
