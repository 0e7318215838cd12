/**
 * A write tool called as an MCP task (docs/mcp-gateway.md, "Writes as tasks"). The host gets a task
 * at once; the gateway then does itself what the plain call's envelope would tell the model to do
 * next, each step a ledger decision like any other (docs/contract.md §4): an unknown outcome is
 * verified again once its not_before has passed, a wait is waited out before the same step is sent
 * again, an approval is waited for by reading the ledger. It stops at the first envelope that asks
 * for none of these, or when its working time ends, and stores that answer: the very answer the
 * plain call gives. Cancelling the task only stops the waiting: an attempt already dispatched runs
 * to its recorded envelope, and the ledger's record stays the truth (operation_status reads it).
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** What the task does, each through the gateway's own paths. */
export interface WriteTaskSteps {
  /** The write as the plain call runs it: plan, gate, dispatch, record, verify an unknown outcome once. */
  call(): Promise<CallToolResult>;
  /** verify_operation for the same operation_ref. */
  verify(): Promise<CallToolResult>;
  /** Whether an approver's grant for this input is recorded in the ledger. */
  approved(): Promise<boolean>;
}

/** The task as the store keeps it, and the task's clock. */
export interface WriteTaskControl {
  status(message: string): Promise<void>;
  /** The host cancelled the task, or it is gone: nothing more is done for it. */
  cancelled(): Promise<boolean>;
  finish(result: CallToolResult): Promise<void>;
  now(): number;
  sleep(ms: number): Promise<void>;
  /** No wait is begun that would end after this instant (ms since the epoch). */
  workUntil: number;
  /** The shortest wait between two steps, so a step the ledger refuses at once is not hammered. */
  pauseMs: number;
}

type Move = 'verify' | 'send_again' | 'await_approval';

interface EnvelopeFields {
  ok?: boolean;
  code?: string;
  next_action?: string;
  retry?: { not_before?: string };
}

/** What the gateway does for the host after this answer, if anything. */
export function nextMove(result: CallToolResult): Move | undefined {
  const envelope = (result.structuredContent ?? {}) as EnvelopeFields;
  if (envelope.ok !== false) return undefined;
  if (envelope.next_action === 'verify_operation') return 'verify';
  if (envelope.next_action === 'wait_and_retry') return 'send_again';
  if (envelope.next_action === 'request_approval') return 'await_approval';
  return undefined;
}

function notBeforeOf(result: CallToolResult): number | undefined {
  const instant = (result.structuredContent as EnvelopeFields | undefined)?.retry?.not_before;
  const at = instant === undefined ? Number.NaN : Date.parse(instant);
  return Number.isFinite(at) ? at : undefined;
}

/** The task's status message: what it waits for, in the gateway's own words (never upstream text). */
export function waitingFor(tool: string, move: Move, result: CallToolResult, until: number): string {
  const code = (result.structuredContent as EnvelopeFields | undefined)?.code ?? 'unknown';
  const at = new Date(until).toISOString();
  if (move === 'verify') return `${tool}: the outcome is unknown (${code}); verifying it by operation_ref at ${at}`;
  if (move === 'send_again') return `${tool}: waiting until ${at} (${code}) before the same operation is sent again`;
  return `${tool}: waiting for an approver to grant this operation in the ledger (${code}); next check at ${at}`;
}

export async function runWriteTask(tool: string, steps: WriteTaskSteps, control: WriteTaskControl): Promise<void> {
  let result = await steps.call();
  for (let move = nextMove(result); move !== undefined; move = nextMove(result)) {
    const until = Math.max(control.now() + control.pauseMs, notBeforeOf(result) ?? 0);
    if (until > control.workUntil) break;
    await control.status(waitingFor(tool, move, result, until));
    await control.sleep(until - control.now());
    if (await control.cancelled()) return;
    if (move === 'verify') result = await steps.verify();
    else if (move === 'send_again') result = await steps.call();
    // The grant is read, never assumed: only then is the write sent, through the same gate.
    else if (await steps.approved()) result = await steps.call();
  }
  if (await control.cancelled()) return;
  await control.status(answered(tool, result));
  await control.finish(result);
}

/** The last status message, so a finished task does not still say what it waited for. */
export function answered(tool: string, result: CallToolResult): string {
  const envelope = (result.structuredContent ?? {}) as EnvelopeFields;
  if (envelope.ok === true) return `${tool}: answered, ok`;
  return `${tool}: answered, ${envelope.code ?? 'not ok'}${envelope.next_action ? `, next_action ${envelope.next_action}` : ''}`;
}
