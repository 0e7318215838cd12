/**
 * The MCP gateway: an MCP server to the host, an MCP client to the upstream servers, and a
 * runtime of the ledger in between. Read tools pass through; every call of a write tool is planned,
 * gated, recorded and answered through the SDK's executeWrite, and an unknown outcome is verified
 * by the gateway itself, by operation_ref, before anything is sent again (docs/contract.md §4).
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import type { RequestTaskStore } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type CreateTaskResult,
  type TaskMetadata,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import {
  approvalGranted as ledgerApprovalGranted,
  callLedgeredTool,
  inputHash,
  verify,
  type Lookup,
  type ToolCall,
  type OperationState,
  LedgerClient,
  LedgerAuthError,
  LedgerError,
  LedgerNotFound,
  callWindowPassed,
  correctInput,
  escalate,
  uncertainOutcome,
  waitAndRetry,
  type NormalizeContext,
  inputFieldsOf,
  normalizeMcpToolResult,
  normalizeNetworkError,
  recover,
  type RecoveryReport,
  envelopeJsonSchema,
  type ToolEnvelope,
} from '@recovery-ledger/client';
import { GATEWAY_TOOLS, type GatewayConfig, type WriteToolConfig } from './gateway-config';
import {
  callError,
  checked,
  envelopeForState,
  hostAnswer,
  ledgerUnavailableEnvelope,
  ledgerUnauthorizedEnvelope,
  type AnswerContext,
} from './host-envelope';
import { makeLookup } from './lookups';
import { hostTool } from './tool-text';
import { CallWindowPassedError, Upstream, UpstreamNotSentError } from './upstream';
import { inHostTrace, inToolSpan } from './telemetry';
import { runWriteTask } from './write-task';

/** A host answer's span attributes: an error answer's type is its envelope code. */
function describeAnswer(result: CallToolResult): Record<string, string> {
  if (!result.isError) return {};
  const code = (result.structuredContent as { code?: unknown } | undefined)?.code;
  return { 'error.type': typeof code === 'string' ? code : 'tool_error' };
}

export const OPERATION_REF_DESCRIPTION =
  'A durable reference for this one operation, chosen once before the first attempt (for example "<task>/<step>"). ' +
  'Reuse exactly the same operation_ref whenever you retry, correct or check this operation; ' +
  'use a new one only for a new, different operation. The gateway uses it as the idempotency key.';

const MAX_REF_LENGTH = 200;
// eslint-disable-next-line no-control-regex -- control characters are exactly what a ref may not hold
const REF_PATTERN = /^[^\u0000-\u001f\u007f]{1,200}$/;

/**
 * A write run as a task (docs/mcp-gateway.md, "Writes as tasks"): kept for the ttl the host asks,
 * within these bounds, and worked on for at most half of it, so its answer stays readable for at
 * least the other half (the store's ttl runs from the task's creation and again from its result).
 */
export const WRITE_TASK_TTL_MS = { default: 600_000, min: 10_000, max: 3_600_000 };
/** How often the host is told to poll, and the shortest pause between two of the task's own steps. */
const WRITE_TASK_POLL_MS = 500;
const WRITE_TASK_PAUSE_MS = 1_000;

export type GatewayLog = (line: Record<string, unknown>) => void;

interface Route {
  upstream: Upstream;
  tool: Tool;
}

/** The envelope's schema as an MCP outputSchema (its root must say type: object). */
function envelopeOutputSchema(): Tool['outputSchema'] {
  const { $schema: _schema, $id: _id, ...schema } = envelopeJsonSchema();
  return { type: 'object', ...schema } as Tool['outputSchema'];
}

const OPERATION_REF_INPUT = {
  type: 'object' as const,
  properties: {
    operation_ref: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_REF_LENGTH,
      description: 'the operation_ref the write tool was called with',
    },
  },
  required: ['operation_ref'],
};

const sideEffectFree = { readOnlyHint: true, destructiveHint: false, openWorldHint: false };

/**
 * The class an upstream's annotations claim: `readOnlyHint: true` is a read; `readOnlyHint: false`
 * or `destructiveHint: true` a write; otherwise it says nothing (the MCP defaults are no evidence).
 * `idempotentHint` alone changes no class: the ledger's operation_ref makes a write safe to retry.
 */
export function annotatedClass(hints: {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
}): 'read' | 'write' | undefined {
  if (hints.readOnlyHint === true) return 'read';
  if (hints.readOnlyHint === false || hints.destructiveHint === true) return 'write';
  return undefined;
}

export class McpGateway {
  readonly ledger: LedgerClient;
  private readonly upstreams = new Map<string, Upstream>();
  private routes = new Map<string, Route>();
  private readonly lookups: Record<string, Lookup> = {};
  /** Operations this process has an upstream call open for: their in-flight state is its own. */
  private readonly inFlight = new Set<string>();
  /** A read tool told to wait: no call reaches it before this instant. */
  private readonly readHolds = new Map<string, { until: number; envelope: Record<string, unknown> }>();
  private recovery: Promise<RecoveryReport | undefined> = Promise.resolve(undefined);

  constructor(
    readonly config: GatewayConfig,
    private readonly log: GatewayLog = () => undefined,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.ledger = new LedgerClient({
      baseUrl: config.ledger.url,
      apiKey: config.ledger.api_key,
      timeoutMs: config.ledger.timeout_ms,
    });
    for (const [name, server] of Object.entries(config.servers))
      this.upstreams.set(name, new Upstream(name, server, log));
    for (const [tool, writeTool] of Object.entries(config.write_tools)) {
      this.lookups[tool] = makeLookup(writeTool.lookup, (server) => this.upstreamFor(server ?? writeTool.server, tool));
    }
  }

  private upstreamFor(server: string | undefined, tool: string): Upstream {
    if (server) return this.upstreams.get(server) as Upstream;
    const route = this.routes.get(tool);
    if (!route) throw new Error(`no upstream lists ${tool}`);
    return route.upstream;
  }

  /** Connects every upstream and learns its tools; a configured write tool nobody lists is an error. */
  async start(): Promise<void> {
    this.routes = await this.discover();
    const problems: string[] = [];
    for (const [name, writeTool] of Object.entries(this.config.write_tools)) {
      const route = this.routes.get(name);
      if (!route) problems.push(`write tool ${name} is listed by no upstream server`);
      else if (writeTool.server && route.upstream.name !== writeTool.server)
        problems.push(`write tool ${name} is not listed by server ${writeTool.server}`);
      if ('tool' in writeTool.lookup && !writeTool.lookup.server && !this.routes.has(writeTool.lookup.tool)) {
        problems.push(`lookup tool ${writeTool.lookup.tool} (for ${name}) is listed by no upstream server`);
      }
    }
    if (problems.length > 0) throw new Error(problems.join('; '));
    for (const [name, route] of this.routes) {
      this.reconcileAnnotations(name, route);
      if (!this.config.write_tools[name] && route.tool.annotations?.readOnlyHint !== true) {
        this.log({
          event: 'unprotected_tool',
          tool: name,
          server: route.upstream.name,
          note: 'not read-only by its annotations and not a configured write tool: it passes through without the ledger',
        });
      }
    }
    this.recovery = this.recoverInFlight();
  }

  /**
   * An upstream's MCP tool annotations are its own claims (docs/mcp-gateway.md, "Tool annotations"):
   * when the configuration is silent they propose the tool's class, logged for whoever configures
   * the gateway; when it is not, the configuration wins and a disagreement is logged. They never
   * take a configured write tool past the ledger: callTool routes by the configuration alone.
   */
  private reconcileAnnotations(name: string, route: Route): void {
    const hints = route.tool.annotations ?? {};
    const proposed = annotatedClass(hints);
    const configured = this.config.write_tools[name] ? 'write' : this.config.read_tools[name] ? 'read' : undefined;
    const said = {
      readOnlyHint: hints.readOnlyHint,
      destructiveHint: hints.destructiveHint,
      idempotentHint: hints.idempotentHint,
    };
    if (configured === undefined) {
      if (proposed !== undefined)
        this.log({
          event: 'tool_class_proposed',
          tool: name,
          server: route.upstream.name,
          class: proposed,
          annotations: said,
          note:
            proposed === 'write'
              ? `configure write_tools.${name} with a lookup to run it through the ledger`
              : 'read-only by its annotations',
        });
    } else if (proposed !== undefined && proposed !== configured) {
      this.log({
        event: 'annotation_disagreement',
        tool: name,
        server: route.upstream.name,
        configured,
        annotations: said,
        note:
          configured === 'write'
            ? 'the configuration wins: every call goes through the ledger'
            : 'the configuration wins: calls pass through without the ledger',
      });
    }
  }

  private async discover(): Promise<Map<string, Route>> {
    const routes = new Map<string, Route>();
    for (const upstream of this.upstreams.values()) {
      for (const tool of await upstream.listTools()) {
        if ((GATEWAY_TOOLS as readonly string[]).includes(tool.name)) {
          throw new Error(`server ${upstream.name} has a tool named ${tool.name}, which the gateway adds itself`);
        }
        const pinned = this.config.write_tools[tool.name]?.server;
        const existing = routes.get(tool.name);
        if (existing && !pinned)
          throw new Error(
            `tool ${tool.name} is listed by servers ${existing.upstream.name} and ${upstream.name}; pin it with write_tools.${tool.name}.server`,
          );
        if (existing && pinned !== upstream.name) continue;
        routes.set(tool.name, { upstream, tool });
      }
    }
    return routes;
  }

  /**
   * After a restart: every operation the ledger has in flight or verifying for one of our write
   * tools is verified by its own operation_ref (the SDK's recover()); nothing is sent.
   */
  private async recoverInFlight(): Promise<RecoveryReport | undefined> {
    try {
      const report = await recover(this.ledger, this.lookups, { olderThanMs: this.config.recovery.older_than_ms });
      const entries = report.entries.filter((entry) => entry.result !== 'no_lookup');
      this.log({
        event: 'recovered',
        entries: entries.map(({ operationRef, tool, listedStatus, result, outcome, status }) => ({
          operationRef,
          tool,
          listedStatus,
          result,
          outcome,
          status,
        })),
      });
      return report;
    } catch (error) {
      // A call on one of them verifies it anyway (it is refused as in flight or unverified).
      this.log({ event: 'recovery_failed', code: error instanceof LedgerError ? error.code : 'ERROR' });
      return undefined;
    }
  }

  // ---- tools/list ------------------------------------------------------------------------------------

  async listTools(): Promise<Tool[]> {
    try {
      this.routes = await this.discover();
    } catch (error) {
      // An upstream that went away keeps its last known tools: a call reconnects it.
      this.log({ event: 'list_tools_failed', message: error instanceof Error ? error.message : String(error) });
    }
    const tools: Tool[] = [];
    for (const [name, route] of this.routes) {
      const writeTool = this.config.write_tools[name];
      const trusted = this.config.servers[route.upstream.name]?.trust_descriptions === true;
      tools.push(
        writeTool
          ? this.hostWriteTool(hostTool(route.tool, trusted, writeTool), writeTool)
          : hostTool(route.tool, trusted, this.config.read_tools[name]),
      );
    }
    tools.push(
      {
        name: 'verify_operation',
        title: 'Verify a write by its operation_ref',
        description:
          'Checks with the provider whether the write made with this operation_ref happened, records the proof in the ledger, and answers the envelope of the outcome. Use it when a write answered next_action verify_operation.',
        inputSchema: OPERATION_REF_INPUT,
        outputSchema: envelopeOutputSchema(),
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      },
      {
        name: 'operation_status',
        title: 'Where an operation stands',
        description:
          'Answers what the ledger knows of an operation_ref: its state, the next action, and the envelope for it. Changes nothing.',
        inputSchema: OPERATION_REF_INPUT,
        annotations: sideEffectFree,
      },
    );
    return tools;
  }

  /** A write tool as the host sees it (`tool` already holds only the words the host may read). */
  private hostWriteTool(tool: Tool, writeTool: WriteToolConfig): Tool {
    const properties = { ...((tool.inputSchema.properties ?? {}) as Record<string, object>) };
    const key = writeTool.idempotency_argument;
    if (key) delete properties[key];
    properties.operation_ref = {
      type: 'string',
      minLength: 1,
      maxLength: MAX_REF_LENGTH,
      description: OPERATION_REF_DESCRIPTION,
    };
    const required = [
      ...new Set([...(tool.inputSchema.required ?? []).filter((name) => name !== key), 'operation_ref']),
    ];
    const { outputSchema: _upstreamOutput, ...rest } = tool;
    return {
      ...rest,
      // The gateway's own tasks (docs/mcp-gateway.md, "Writes as tasks"), whatever the upstream runs.
      execution: { ...rest.execution, taskSupport: 'optional' },
      description: `${tool.description ?? ''}${tool.description ? '\n\n' : ''}Runs through a recovery ledger: give an operation_ref. The answer's structuredContent is a typed envelope; follow its next_action (never retry on your own after an unknown outcome).`,
      inputSchema: { ...tool.inputSchema, properties, required },
      // The host gets the envelope, which carries the upstream's result inside it on success.
      outputSchema: envelopeOutputSchema(),
    };
  }

  // ---- tools/call ------------------------------------------------------------------------------------

  async callTool(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
    // A write's execute_tool span is executeWrite's (the client's); the calls the ledger does not see get theirs here.
    if (this.config.write_tools[name] && this.routes.has(name)) return this.routeCall(name, args);
    return inToolSpan(name, () => this.routeCall(name, args), describeAnswer);
  }

  private async routeCall(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
    if (name === 'verify_operation') return this.verifyOperation(args);
    if (name === 'operation_status') return this.operationStatus(args);
    const route = this.routes.get(name);
    if (!route) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${name}`);
    const writeTool = this.config.write_tools[name];
    return writeTool ? this.callWrite(name, route, writeTool, args) : this.callRead(name, route, args);
  }

  private operationRefOf(args: Record<string, unknown>): string | undefined {
    const ref = args.operation_ref;
    return typeof ref === 'string' && REF_PATTERN.test(ref) ? ref : undefined;
  }

  private runIdOf(ref: string): string {
    const slash = ref.indexOf('/');
    return slash > 0 ? ref.slice(0, slash) : this.config.run_id;
  }

  private answerContext(writeTool: WriteToolConfig | undefined, extra: Partial<AnswerContext> = {}): AnswerContext {
    return { vouched: writeTool?.vouched_codes ?? [], now: this.now(), ...extra };
  }

  private answer(tool: string, envelope: ToolEnvelope): CallToolResult {
    return hostAnswer(tool, checked(envelope));
  }

  private async callWrite(
    name: string,
    route: Route,
    writeTool: WriteToolConfig,
    args: Record<string, unknown>,
  ): Promise<CallToolResult> {
    const ref = this.operationRefOf(args);
    if (!ref) {
      return callError(
        `${name} needs operation_ref: a durable reference (1 to ${MAX_REF_LENGTH} characters) chosen once for this operation and reused on every retry. Nothing was sent.`,
      );
    }
    await this.recovery;
    // The loop every host runs (the client's callLedgeredTool); the gateway waits out nothing
    // itself: a not_before goes to the model, or to the write's task (src/write-task.ts).
    const result = await callLedgeredTool(this.ledger, {
      tool: name,
      operationRef: ref,
      runId: this.runIdOf(ref),
      input: this.writeInputOf(args, writeTool),
      policy: writeTool.policy,
      call: this.toolCall(name, route, writeTool),
      lookup: this.lookups[name],
      vouchedCodes: writeTool.vouched_codes,
      // The call window declared on every dispatch is the upstream call timeout: the ledger's call
      // deadline is then the gateway's own, and a not_found is conclusive only a consistency
      // window after it (docs/contract.md §4); the SDK starts and aborts the call within it.
      callWindowMs: writeTool.timeout_ms,
      inDoubtAfterMs: this.config.recovery.older_than_ms,
      inFlight: (operationRef) => this.inFlight.has(operationRef),
      now: this.now,
      log: this.log,
    });
    return hostAnswer(name, result.envelope);
  }

  /** What is sent and hashed: the arguments without the operation_ref and the key the gateway sets. */
  private writeInputOf(args: Record<string, unknown>, writeTool: WriteToolConfig): Record<string, unknown> {
    const { operation_ref: _ref, ...input } = args;
    const key = writeTool.idempotency_argument;
    if (key && key !== 'operation_ref') delete input[key];
    return input;
  }

  /** A step in flight that this process did not send is verified only once it is old enough. */
  private oldEnough(state: OperationState): boolean {
    const since = state.since ? Date.parse(state.since) : NaN;
    return Number.isNaN(since) || this.now().getTime() - since >= this.config.recovery.older_than_ms;
  }

  /** An approval is for the input it was asked for (docs/contract.md §4.4); one without a hash predates that. */
  private approvalGranted(ref: string, hash: string): Promise<boolean> {
    return ledgerApprovalGranted(this.ledger, ref, hash);
  }

  /** The call executeWrite makes once the ledger granted the attempt. */
  private toolCall(name: string, route: Route, writeTool: WriteToolConfig): ToolCall<Record<string, unknown>> {
    return async (input, context) => {
      const base: NormalizeContext = {
        operationRef: context.operationRef,
        sideEffect: 'write',
        now: this.now(),
        verificationTool: 'verify_operation',
      };
      const key = writeTool.idempotency_argument;
      const args = key ? { ...input, [key]: context.idempotencyKey } : input;
      this.inFlight.add(context.operationRef);
      try {
        // The signal ends with the call window the ledger granted (less a margin): given up then.
        const result = await route.upstream.callTool(name, args, writeTool.timeout_ms, context.signal);
        return normalizeMcpToolResult(result, {
          ...base,
          now: this.now(),
          allowedCodes: writeTool.vouched_codes,
          inputFields: inputFieldsOf(input),
        });
      } catch (error) {
        const now = this.now();
        if (error instanceof CallWindowPassedError) return callWindowPassed({ ...base, now });
        if (error instanceof UpstreamNotSentError)
          return waitAndRetry({ ...base, now }, 'DEPENDENCY_UNAVAILABLE', undefined);
        // A JSON-RPC error answer is the server refusing the call itself: the tool did not run.
        if (error instanceof McpError && error.code === ErrorCode.InvalidParams)
          return correctInput({ ...base, now }, 'INVALID_INPUT', undefined);
        if (error instanceof McpError && error.code === ErrorCode.MethodNotFound)
          return escalate({ ...base, now }, 'UPSTREAM_REJECTED', 'internal');
        this.log({
          event: 'upstream_call_failed',
          tool: name,
          operation_ref: context.operationRef,
          code: error instanceof McpError ? error.code : undefined,
        });
        // A timeout, the window's end, a dropped connection, a crashed server, an unreadable
        // answer: it may have run.
        if (error instanceof McpError || context.signal?.aborted)
          return uncertainOutcome({ ...base, now }, 'OUTCOME_UNKNOWN');
        // A transport error (streamable HTTP) is judged by its codes: refused before sending, or not.
        return normalizeNetworkError(error, { ...base, now });
      } finally {
        this.inFlight.delete(context.operationRef);
      }
    };
  }

  // ---- read tools --------------------------------------------------------------------------------------

  private async callRead(name: string, route: Route, args: Record<string, unknown>): Promise<CallToolResult> {
    const hold = this.readHolds.get(name);
    const now = this.now();
    if (hold && now.getTime() < hold.until) {
      const envelope = {
        ...hold.envelope,
        code: 'RETRY_NOT_BEFORE',
        agent_message: `It is too early to call ${name} again; nothing was sent. Call it again after not_before.`,
      };
      return this.readError(route, envelope);
    }
    const base = { sideEffect: 'read' as const, now, operationRef: `read:${name}` };
    let result: CallToolResult;
    try {
      result = await route.upstream.callTool(name, args, this.config.read_timeout_ms);
    } catch (error) {
      const envelope = waitAndRetry(
        base,
        error instanceof UpstreamNotSentError ? 'DEPENDENCY_UNAVAILABLE' : 'REQUEST_INTERRUPTED',
        undefined,
      );
      return this.readError(route, this.small(envelope));
    }
    if (!result.isError) return result;
    const structured = result.structuredContent as Record<string, unknown> | undefined;
    const upstreamRef =
      structured && typeof structured.operation_ref === 'string' ? structured.operation_ref : undefined;
    const envelope = normalizeMcpToolResult(result, {
      ...base,
      operationRef: upstreamRef ?? base.operationRef,
      now: this.now(),
      allowedCodes: this.config.read_vouched_codes,
      inputFields: inputFieldsOf(args),
    });
    const small = this.small(envelope);
    if (!envelope.ok && envelope.next_action === 'wait_and_retry' && envelope.retry.not_before) {
      this.readHolds.set(name, { until: Date.parse(envelope.retry.not_before), envelope: small });
    }
    return this.readError(route, small);
  }

  /** The small envelope of a read (a stable code and the retry direction): a read commits nothing. */
  private small(envelope: ToolEnvelope): Record<string, unknown> {
    if (envelope.ok) return { ok: true };
    const { commit_state: _commit, operation_ref: _ref, ...rest } = envelope;
    return rest;
  }

  private readError(route: Route, envelope: Record<string, unknown>): CallToolResult {
    const retry = envelope.retry as { not_before?: string } | undefined;
    const text = `${route.tool.name} failed: ${String(envelope.code)}. ${String(envelope.agent_message)} next_action=${String(envelope.next_action)}${retry?.not_before ? ` not_before=${retry.not_before}` : ''}`;
    // A tool with its own output schema cannot carry the envelope as structuredContent; its text does.
    const structured = route.tool.outputSchema ? {} : { structuredContent: envelope };
    return { isError: true, content: [{ type: 'text', text: `${text}\n${JSON.stringify(envelope)}` }], ...structured };
  }

  // ---- the gateway's own tools -----------------------------------------------------------------------

  private async stateOf(ref: string): Promise<OperationState | undefined> {
    try {
      return await this.ledger.getOperation(ref);
    } catch (error) {
      if (error instanceof LedgerNotFound) return undefined;
      throw error;
    }
  }

  private async verifyOperation(args: Record<string, unknown>): Promise<CallToolResult> {
    const ref = this.operationRefOf(args);
    if (!ref) return callError('verify_operation needs the operation_ref the write was called with.');
    await this.recovery;
    try {
      const state = await this.stateOf(ref);
      if (!state)
        return callError(
          `No operation with operation_ref ${JSON.stringify(ref)} is recorded: nothing was ever sent for it.`,
        );
      const tool = state.tool ?? '';
      const writeTool = this.config.write_tools[tool];
      if (!writeTool) return callError(`operation_ref ${JSON.stringify(ref)} is not a write of this gateway's tools.`);
      if (state.status === 'dispatched' && (this.inFlight.has(ref) || !this.oldEnough(state))) {
        return this.answer(
          tool,
          envelopeForState(state, this.answerContext(writeTool, { refusal: 'ATTEMPT_IN_FLIGHT' })),
        );
      }
      if (state.status === 'dispatched' || state.status === 'verifying') {
        const verified = await verify(this.ledger, { operationRef: ref, tool }, this.lookups[tool], { now: this.now });
        this.log({
          event: 'verified',
          operation_ref: ref,
          outcome: verified.outcome,
          status: verified.status,
          refusal: verified.refusal?.code,
        });
        return this.answer(
          tool,
          envelopeForState(
            verified.state ?? state,
            this.answerContext(writeTool, {
              refusal: verified.refusal?.code,
              directive: verified.refusal ? verified.directive : undefined,
            }),
          ),
        );
      }
      return this.answer(tool, envelopeForState(state, this.answerContext(writeTool)));
    } catch (error) {
      if (error instanceof LedgerAuthError) return this.answer('verify_operation', ledgerUnauthorizedEnvelope(ref));
      if (error instanceof LedgerError)
        return this.answer('verify_operation', ledgerUnavailableEnvelope(ref, this.now(), error.retryAfterSeconds));
      throw error;
    }
  }

  private async operationStatus(args: Record<string, unknown>): Promise<CallToolResult> {
    const ref = this.operationRefOf(args);
    if (!ref) return callError('operation_status needs an operation_ref.');
    let state: OperationState | undefined;
    try {
      state = await this.stateOf(ref);
    } catch (error) {
      if (error instanceof LedgerError)
        return callError(`The ledger could not be reached (${error.code}); try again later.`);
      throw error;
    }
    if (!state) {
      const status = { operation_ref: ref, status: 'unplanned' };
      return {
        content: [
          {
            type: 'text',
            text: `No operation with this operation_ref is recorded: nothing was ever sent for it.\n${JSON.stringify(status)}`,
          },
        ],
        structuredContent: status,
      };
    }
    const writeTool = this.config.write_tools[state.tool ?? ''];
    const envelope = checked(envelopeForState(state, this.answerContext(writeTool)));
    const status = {
      operation_ref: ref,
      tool: state.tool,
      status: state.status,
      attempts_used: state.attempts_used,
      attempts_remaining: state.attempts_remaining,
      ...(state.not_before ? { not_before: state.not_before } : {}),
      next_action: envelope.ok ? 'none' : envelope.next_action,
      envelope,
    };
    return {
      content: [
        {
          type: 'text',
          text: `${ref} is ${state.status}; next_action ${status.next_action}.\n${JSON.stringify(status)}`,
        },
      ],
      structuredContent: status,
    };
  }

  // ---- writes as tasks -------------------------------------------------------------------------------

  /**
   * Answers a write called as a task at once with the task, and carries the write on in the
   * background (src/write-task.ts). The task id is the store's random one: it says nothing of the
   * operation_ref or its idempotency key.
   */
  private async startWriteTask(
    name: string,
    args: Record<string, unknown>,
    params: TaskMetadata,
    store: RequestTaskStore,
  ): Promise<CreateTaskResult> {
    const writeTool = this.config.write_tools[name];
    if (!writeTool || !this.routes.has(name))
      throw new McpError(ErrorCode.InvalidParams, `${name} does not run as a task: only the write tools do`);
    const { min, max } = WRITE_TASK_TTL_MS;
    const ttl = Math.min(max, Math.max(min, params.ttl ?? WRITE_TASK_TTL_MS.default));
    const task = await store.createTask({ ttl, pollInterval: WRITE_TASK_POLL_MS });
    const taskId = task.taskId;
    const ref = this.operationRefOf(args);
    const cancelled = async () => {
      try {
        return (await store.getTask(taskId)).status === 'cancelled';
      } catch {
        return true; // gone: nobody can read its answer any more
      }
    };
    const work = runWriteTask(
      name,
      {
        call: () => this.callTool(name, args),
        verify: () => this.verifyOperation({ operation_ref: ref }),
        approved: () =>
          ref ? this.approvalGranted(ref, inputHash(this.writeInputOf(args, writeTool))) : Promise.resolve(false),
      },
      {
        status: (message) => store.updateTaskStatus(taskId, 'working', message),
        cancelled,
        // An envelope that is not a success is still the tool's answer, isError as in a plain call: the
        // SDK's clients turn a failed task into a bare "Task failed" and the model would not read it.
        finish: (result) => store.storeTaskResult(taskId, 'completed', result),
        now: () => this.now().getTime(),
        sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
        workUntil: this.now().getTime() + ttl / 2,
        pauseMs: WRITE_TASK_PAUSE_MS,
      },
    );
    work.catch(async (error: unknown) => {
      this.log({ event: 'write_task_failed', tool: name, error: error instanceof Error ? error.name : 'unknown' });
      if (await cancelled()) return;
      await store
        .storeTaskResult(
          taskId,
          'failed',
          callError(`The gateway could not finish this task; call operation_status with the operation_ref.`),
        )
        .catch(() => undefined);
    });
    return { task };
  }

  // ---- serving ---------------------------------------------------------------------------------------

  /** The MCP server the host talks to (connect it to a transport). */
  server(): Server {
    const server = new Server(
      { name: 'recovery-ledger-mcp-gateway', version: '1.0.0' },
      {
        capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
        taskStore: new InMemoryTaskStore(),
        instructions:
          'Write tools run through a recovery ledger. Give each operation an operation_ref and reuse it on every retry of that operation. Follow the next_action of each answer; after verify_operation, never send the write again on your own.',
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await this.listTools() }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: args = {}, task } = request.params;
      const store = extra.taskStore;
      if (task && store) return inHostTrace(request.params._meta, () => this.startWriteTask(name, args, task, store));
      return inHostTrace(request.params._meta, () => this.callTool(name, args));
    });
    return server;
  }

  async close(): Promise<void> {
    await Promise.all([...this.upstreams.values()].map((upstream) => upstream.close()));
  }
}
