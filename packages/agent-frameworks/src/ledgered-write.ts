/**
 * The part every framework integration shares, with no framework in it: the options a ledgered
 * write tool takes, which step of the run a tool call is (docs/integrations.md, "The operation_ref
 * rule"), the client's callLedgeredTool run for it, the approval question a framework's approval
 * surface asks, and the answers for input the tool's schema refuses and for read-only tools.
 */
import {
  approvalGranted,
  callLedgeredTool,
  checked,
  correctInput,
  forStepTool,
  inputHash,
  LedgerError,
  LedgerNotFound,
  ledgerUnavailableEnvelope,
  modelText,
  operationRefFor,
  type LedgeredToolLedger,
  type LedgeredToolPolicy,
  type LedgeredToolResult,
  type Lookup,
  type OperationState,
  type ToolCall,
  type ToolEnvelope,
} from '@recovery-ledger/client';

export interface LedgeredWriteOptions<Input> {
  /** A client with a runtime key: it plans, dispatches and records; it never grants an approval. */
  ledger: LedgeredToolLedger;
  /** The tool's name, for the model and the ledger. */
  name: string;
  /** The run (task, thread, conversation) this agent works on: stable across its restarts. */
  runId: string;
  policy: LedgeredToolPolicy;
  /** Calls the provider once with context.idempotencyKey as its idempotency key; answers an envelope. */
  call: ToolCall<Input>;
  /** Finds the write by operation_ref at the provider (verification). */
  lookup: Lookup;
  /** Provider codes the model may see as they are. */
  vouchedCodes?: readonly string[];
  /** The longest the provider call may stay open. */
  callWindowMs?: number;
  /** How long one tool call may wait for a not_before before it tells the model when (default 30 s). */
  maxWaitMs?: number;
  /**
   * The caller's own operation_ref for a call, which names the step; undefined falls back to the
   * key, then to the run's steps. Never the framework's tool-call id alone: a model's new call of
   * the same step gets a new one.
   */
  operationRef?: (input: Input, context: RefContext) => string | undefined;
  /**
   * A name the caller gives the step this call belongs to (an application step id, a user turn's
   * id): every call with the same key is one step, its input corrected from call to call; the ref
   * is operationRefFor({ runId, tool, key }). Undefined: the run's steps are counted (see StepBook).
   */
  key?: (input: Input, context: RefContext) => string | undefined;
  log?: (line: Record<string, unknown>) => void;
}

export interface RefContext {
  runId: string;
  /** The framework's id for this tool call: the same when the framework resumes or replays the call. */
  toolCallId?: string;
}

export const DEFAULT_MAX_WAIT_MS = 30_000;

/**
 * The step a tool call was given: its operation_ref, and `done()` once the call has answered
 * (`done(true)`: the call waits for an approval, and its step stays its own until it runs).
 */
export interface TakenStep {
  ref: string;
  done(awaitingApproval?: boolean): void;
}

/**
 * Which step of the run a call of one write tool is, when the caller names none. Steps are counted
 * per run and tool (`<run>/<tool>/s.<n>`, operationRefFor), from the ledger, so a restarted agent
 * finds them again:
 *
 * - the call the framework resumes or replays (the same tool-call id) is the step it was;
 * - a step is open until it succeeds or a person cancels it: the next call of the tool continues the
 *   lowest open step, whatever its input (a corrected input of that step, within its attempts, its
 *   approval asked again; an unknown outcome verified before anything is sent), so a model that
 *   calls again with one harmless change after a timeout gets no second write;
 * - a call whose input is the one a succeeded step wrote answers that success (the same write asked
 *   twice is one write); any other input, once no step is open, is the next step;
 * - calls running at once (the parallel tool calls of one model turn) never share a step.
 */
export class StepBook {
  private readonly byCall = new Map<string, number>();
  private readonly running = new Map<number, number>();
  /** Steps a call asked approval for and has not run yet: that call's id and input hash. */
  private readonly awaiting = new Map<number, { toolCallId: string; hash: string }>();
  /** Steps that are over, with the input hash a succeeded one wrote (undefined: cancelled). */
  private readonly closed = new Map<number, string | undefined>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly ledger: LedgeredToolLedger,
    private readonly runId: string,
    private readonly tool: string,
  ) {}

  refOf(step: number): string {
    return operationRefFor({ runId: this.runId, tool: this.tool, step });
  }

  /** The step for this call, held until `done()`; ledger errors are thrown (nothing was planned). */
  take(hash: string, toolCallId: string | undefined): Promise<TakenStep> {
    const taken = this.queue.then(() => this.choose(hash, toolCallId));
    this.queue = taken.catch(() => undefined);
    return taken.then((step) => {
      if (toolCallId) this.byCall.set(toolCallId, step);
      this.running.set(step, (this.running.get(step) ?? 0) + 1);
      let released = false;
      return {
        ref: this.refOf(step),
        done: (awaitingApproval = false) => {
          if (released) return;
          released = true;
          if (awaitingApproval && toolCallId) this.awaiting.set(step, { toolCallId, hash });
          else if (this.awaiting.get(step)?.toolCallId === toolCallId) this.awaiting.delete(step);
          const left = (this.running.get(step) ?? 1) - 1;
          if (left > 0) this.running.set(step, left);
          else this.running.delete(step);
        },
      };
    });
  }

  private async choose(hash: string, toolCallId: string | undefined): Promise<number> {
    const resumed = toolCallId === undefined ? undefined : this.byCall.get(toolCallId);
    if (resumed !== undefined) return resumed;
    for (let step = 1; ; step++) {
      if (this.closed.has(step)) {
        if (this.closed.get(step) === hash) return step;
        continue;
      }
      // A step another call of this process holds now is that call's (planned or not yet): a call
      // running beside it (a sibling of the same model turn) gets its own.
      if (this.running.has(step)) continue;
      // A step held for another call's approval is that call's, unless this is the same write asked again.
      const waiting = this.awaiting.get(step);
      if (waiting && waiting.toolCallId !== toolCallId && waiting.hash !== hash) continue;
      const state = await this.stateOf(step);
      if (!state) return step;
      if (state.status === 'succeeded') {
        const written = await this.hashWritten(step, state);
        this.closed.set(step, written);
        if (written === hash) return step;
        continue;
      }
      if (state.status === 'cancelled') {
        this.closed.set(step, undefined);
        continue;
      }
      return step;
    }
  }

  private async stateOf(step: number): Promise<OperationState | undefined> {
    try {
      const state = await this.ledger.getOperation(this.refOf(step));
      return state.status === 'unplanned' ? undefined : state;
    } catch (error) {
      if (error instanceof LedgerNotFound) return undefined;
      throw error;
    }
  }

  /** The input hash of the attempt that succeeded (a corrected input may differ from the planned one). */
  private async hashWritten(step: number, state: OperationState): Promise<string | undefined> {
    const { events } = await this.ledger.getEvents(this.refOf(step));
    const attempt = (state.success as { attempt?: unknown } | undefined)?.attempt ?? state.current_attempt;
    const dispatched = events.find((event) => event.type === 'AttemptDispatched' && event.data.attempt === attempt);
    const planned = events.find((event) => event.type === 'StepPlanned');
    const written = dispatched?.data.input_hash ?? planned?.data.input_hash;
    return typeof written === 'string' ? written : undefined;
  }
}

/**
 * One ledgered write tool of one run: every wrapper builds one per tool and asks it, per call, for
 * the step, the approval question and the run through the ledger.
 */
export class LedgeredWrite<Input> {
  readonly book: StepBook;

  constructor(readonly options: LedgeredWriteOptions<Input>) {
    this.book = new StepBook(options.ledger, options.runId, options.name);
  }

  /** The step of this call: the caller's ref, the caller's key, or the run's next (StepBook). */
  async step(input: Input, context: RefContext): Promise<TakenStep> {
    const own = this.options.operationRef?.(input, context);
    if (own !== undefined) return { ref: own, done: () => undefined };
    const key = this.options.key?.(input, context);
    if (key !== undefined) {
      return {
        ref: operationRefFor({ runId: this.options.runId, tool: this.options.name, key }),
        done: () => undefined,
      };
    }
    return this.book.take(inputHash(input), context.toolCallId);
  }

  /** One call of the write tool through the ledger (the client's callLedgeredTool). */
  async run(
    input: Input,
    context: RefContext & { signal?: AbortSignal },
    call: ToolCall<Input> = this.options.call,
  ): Promise<LedgeredToolResult> {
    let taken: TakenStep;
    try {
      taken = await this.step(input, context);
    } catch (error) {
      if (!(error instanceof LedgerError)) throw error;
      // The ledger cannot say which step this is: nothing is planned or sent, the model waits.
      const ref = this.book.refOf(0);
      return answerOf(this.options.name, ledgerUnavailableEnvelope(ref, new Date(), error.retryAfterSeconds));
    }
    try {
      return await this.runAt(taken.ref, input, context, call);
    } finally {
      taken.done();
    }
  }

  private runAt(
    ref: string,
    input: Input,
    context: { signal?: AbortSignal },
    call: ToolCall<Input>,
  ): Promise<LedgeredToolResult> {
    const options = this.options;
    return callLedgeredTool(options.ledger, {
      tool: options.name,
      operationRef: ref,
      runId: options.runId,
      input,
      policy: options.policy,
      call,
      lookup: options.lookup,
      stepTool: true,
      maxWaitMs: options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
      ...(options.vouchedCodes ? { vouchedCodes: options.vouchedCodes } : {}),
      ...(options.callWindowMs === undefined ? {} : { callWindowMs: options.callWindowMs }),
      ...(context.signal ? { signal: context.signal } : {}),
      ...(options.log ? { log: options.log } : {}),
    });
  }

  /**
   * The question a framework's approval surface asks before it runs the tool: true while the ledger
   * holds no grant for this input of this step. The first time, the loop records the request for
   * approval (an attempt that sends nothing), so the ledger shows the step awaiting approval to its
   * approvers; a corrected input asks again (docs/contract.md §4.4).
   */
  async needsApproval(input: Input, context: RefContext, call: ToolCall<Input> = this.options.call): Promise<boolean> {
    if (!this.options.policy.approval_required) return false;
    let taken: TakenStep;
    try {
      taken = await this.step(input, context);
    } catch (error) {
      // The ledger cannot say: let the tool run, its loop answers LEDGER_UNAVAILABLE and sends nothing
      // (the ledger's gate, not this question, is what holds a write back).
      if (error instanceof LedgerError) return false;
      throw error;
    }
    let pending = false;
    try {
      if (await approvalGranted(this.options.ledger, taken.ref, inputHash(input))) return false;
      const result = await this.runAt(taken.ref, input, {}, call);
      pending = !result.ok;
      return pending;
    } catch (error) {
      if (error instanceof LedgerError) return false;
      throw error;
    } finally {
      taken.done(pending);
    }
  }

  /** The answer for input the tool's own schema refuses: correct_input, and nothing planned or sent. */
  async invalidInput(input: unknown, context: RefContext, fields: readonly string[]): Promise<LedgeredToolResult> {
    let ref = this.book.refOf(0);
    try {
      const taken = await this.step(input as Input, context);
      taken.done();
      ref = taken.ref;
    } catch (error) {
      if (!(error instanceof LedgerError)) throw error;
    }
    const envelope = checked(
      correctInput({ operationRef: ref, sideEffect: 'write', now: new Date() }, 'INVALID_INPUT', fields[0]),
    );
    return { ...answerOf(this.options.name, envelope), status: 'unplanned' };
  }
}

function answerOf(name: string, raw: ToolEnvelope): LedgeredToolResult {
  const envelope = forStepTool(checked(raw));
  return {
    status: 'unknown',
    envelope,
    modelText: modelText(name, envelope, { stepTool: true }),
    ok: envelope.ok,
    approvalPending: false,
    ...(!envelope.ok && envelope.retry.not_before ? { notBefore: envelope.retry.not_before } : {}),
    toolCalls: 0,
  };
}

/** What a read-only tool's failure tells the model: a stable code, the retry direction and the field at fault only. */
export function readAnswer(envelope: ToolEnvelope): Record<string, unknown> {
  if (envelope.ok) return { ok: true, result: envelope.result };
  return {
    ok: false,
    code: envelope.code,
    category: envelope.category,
    next_action: envelope.next_action,
    retry: envelope.retry,
    // The field the provider refused, when it named one: what a correction changes.
    ...(envelope.safe_details?.field === undefined ? {} : { field: envelope.safe_details.field }),
    agent_message: envelope.agent_message,
  };
}
