/**
 * A worker that creates invoices through the SDK, safe to kill at any point:
 *
 *   node dist/examples/invoice-worker.js --run run_demo --count 5 \
 *     [--ledger http://127.0.0.1:3000] [--provider http://127.0.0.1:4010] [--window-ms 2000]
 *
 * It runs recover() first, then drives each step until it is succeeded, escalated, or parked for a
 * person (needs_input, awaiting_approval). The ledger decides; this loop is only the scheduler the
 * SDK hands its directives to: it waits for `not_before`, verifies when told, and never retries a
 * write whose outcome is unknown. Each line of output is one JSON object.
 */
import {
  executeWrite,
  LedgerClient,
  LedgerError,
  LedgerNotFound,
  OutcomeNotRecordedError,
  recover,
  verify,
  type WriteOutcome,
  type WriteStep,
} from '@recovery-ledger/client';
import { CREATE_INVOICE, invoiceTools, VERIFICATION_TOOL, type InvoiceInput } from './invoice-tools';
import { exitOnHelp, flag, integerFlag, log } from './example-cli';
import { setTimeout as sleep } from 'node:timers/promises';

interface Job {
  step: WriteStep<InvoiceInput>;
  /** When the next move may happen (epoch ms). */
  due: number;
  /** The next move: read where the step stands, ask for a dispatch, or verify what is in flight. */
  next: 'inspect' | 'execute' | 'verify';
  /** Moves made, to stop a step that never settles. */
  moves: number;
  final?: string;
}

const PARKED = new Set(['needs_input', 'awaiting_approval']);
const TERMINAL = new Set(['succeeded', 'escalated']);

/** The worker's scheduling, by the state the ledger reports (not by guessing from the tool's result). */
function schedule(job: Job, status: string, notBefore: string | undefined): void {
  job.due = notBefore ? Date.parse(notBefore) : Date.now();
  if (TERMINAL.has(status) || PARKED.has(status)) job.final = status;
  // In flight without an outcome (ours, lost to a crash, or another worker's), or unknown: verify.
  else if (status === 'dispatched' || status === 'verifying') job.next = 'verify';
  else job.next = 'execute';
}

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const ledgerUrl = flag('ledger', process.env.LEDGER_URL ?? 'http://127.0.0.1:3000')!;
  const providerUrl = flag('provider', process.env.PROVIDER_URL ?? 'http://127.0.0.1:4010')!;
  const runId = flag('run', process.env.RUN_ID ?? 'run_demo')!;
  const count = integerFlag('count', 3);
  const first = integerFlag('first', 1);
  const windowMs = integerFlag('window-ms', 2000);
  const maxAttempts = integerFlag('max-attempts', 3);
  const maxMoves = integerFlag('max-moves', 50);
  const recoverOlderThanMs = integerFlag('recover-older-than-ms', 0);

  const ledger = new LedgerClient({ baseUrl: ledgerUrl, apiKey: process.env.LEDGER_API_KEY, timeoutMs: 5000 });
  const toolTimeoutMs = integerFlag('tool-timeout-ms', 2000);
  const tools = invoiceTools(providerUrl, { timeoutMs: toolTimeoutMs });
  const lookups = { [CREATE_INVOICE]: tools.lookup };

  // A restarted worker first settles what a previous life left in flight, by the same operation_refs.
  const recovered = await recover(ledger, lookups, { olderThanMs: recoverOlderThanMs });
  log({ event: 'recovered', entries: recovered.entries, missing_lookups: recovered.missingLookups });

  const jobs: Job[] = Array.from({ length: count }, (_, index) => {
    const n = first + index;
    return {
      step: {
        // Durable and derived from the job, never from the attempt: the same on every restart.
        operationRef: `${runId}/invoice_${n}`,
        runId,
        tool: CREATE_INVOICE,
        input: { customer_id: `cus_${n}`, amount_cents: 1000 + n, currency: 'EUR' },
        policy: { max_attempts: maxAttempts, consistency_window_ms: windowMs, verification_tool: VERIFICATION_TOOL },
      },
      due: Date.now(),
      next: 'inspect',
      moves: 0,
    };
  });

  for (;;) {
    const open = jobs.filter((job) => job.final === undefined);
    if (open.length === 0) break;
    const ready = open.filter((job) => job.due <= Date.now());
    if (ready.length === 0) {
      await sleep(Math.max(10, Math.min(...open.map((job) => job.due)) - Date.now()));
      continue;
    }
    for (const job of ready) {
      if (++job.moves > maxMoves) {
        job.final = 'unsettled';
        continue;
      }
      const ref = job.step.operationRef;
      try {
        if (job.next === 'inspect') {
          // A job a previous life finished needs no new dispatch: executeWrite would replay its
          // success (and the ledger count a prevented duplicate), which is safe but only noise.
          const state = await ledger.getOperation(ref).catch((error: unknown) => {
            if (error instanceof LedgerNotFound) return undefined;
            throw error;
          });
          if (state) log({ event: 'inspected', operation_ref: ref, status: state.status });
          schedule(job, state?.status ?? 'planned', undefined);
          continue;
        }
        if (job.next === 'verify') {
          const checked = await verify(ledger, { operationRef: ref, tool: CREATE_INVOICE }, tools.lookup);
          log({
            event: 'verified',
            operation_ref: ref,
            kind: checked.kind,
            outcome: checked.outcome,
            status: checked.status,
            not_before: checked.notBefore,
          });
          // A premature not_found keeps the step verifying until the window has passed.
          schedule(job, checked.status, checked.notBefore);
          continue;
        }
        // The call is open at most the tool's timeout: declared, so a worker killed mid-call leaves an
        // attempt whose not_found is conclusive a window after that (docs/reliability.md).
        const outcome: WriteOutcome = await executeWrite(ledger, job.step, tools.createInvoice, {
          callWindowMs: toolTimeoutMs,
        });
        log({
          event: 'executed',
          operation_ref: ref,
          kind: outcome.kind,
          status: outcome.status,
          attempt: outcome.attempt,
          tool_called: outcome.toolCalled,
          code: outcome.envelope && !outcome.envelope.ok ? outcome.envelope.code : outcome.refusal?.code,
          next_action: outcome.directive.next_action,
          not_before: outcome.notBefore,
        });
        schedule(job, outcome.status, outcome.notBefore);
      } catch (error) {
        if (error instanceof OutcomeNotRecordedError) {
          // The tool ran; the ledger still has the attempt in flight: verify it once it answers.
          log({ event: 'outcome_not_recorded', operation_ref: ref, attempt: error.attempt });
          job.next = 'verify';
          job.due = Date.now() + 1000;
        } else if (error instanceof LedgerError) {
          log({ event: 'ledger_error', operation_ref: ref, code: error.code, status: error.status });
          job.due = Date.now() + (error.retryAfterSeconds ?? 1) * 1000;
        } else {
          throw error;
        }
      }
    }
  }

  const summary: Record<string, string[]> = {};
  for (const job of jobs) (summary[job.final!] ??= []).push(job.step.operationRef);
  log({ event: 'done', summary });
}

main().catch((error: unknown) => {
  process.stderr.write(
    `invoice worker failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
