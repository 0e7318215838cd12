/**
 * A Mastra agent as its own process, for the SIGKILL test:
 *   node --require ./test/chaos/swc-register.cjs test/support/agent-scripts/mastra-agent.ts --run RUN
 * (AGENT_LEDGER_URL and AGENT_PROVIDER_URL from runAgentScript). Its scripted model asks for one
 * invoice, then answers a text. Run again with the same --run, it is the agent's resume: the same
 * generate over the same conversation, which reaches the same operation_ref.
 */
import { Agent } from '@mastra/core/agent';
import { z } from 'zod';
import { ledgeredMastraTool } from '@recovery-ledger/agent-frameworks/mastra';
import { agentWorldFromEnv, emit } from '../agent-framework-harness';
import { scriptedModel } from '../ai-sdk-scripted-model';

export const MASTRA_AGENT_INPUT = { customer_id: 'cus_mastrakill', amount_cents: 4300, currency: 'EUR' };

async function main(): Promise<void> {
  const run = process.argv[process.argv.indexOf('--run') + 1];
  // A call window long enough for the provider's slow answer: the process dies inside it.
  const world = agentWorldFromEnv({ callTimeoutMs: 10_000 });
  const createInvoice = ledgeredMastraTool({
    ...world.writeTool(),
    ledger: world.runtime,
    name: 'create_invoice',
    description: 'Creates an invoice.',
    runId: run,
    inputSchema: z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() }),
    log: (line) => emit(line),
  });
  emit({ event: 'started', run });
  const agent = new Agent({
    id: 'invoicer',
    name: 'invoicer',
    instructions: 'Create the invoices asked for.',
    // The AI SDK's mock model: Mastra runs AI SDK models (its own types want the stream shape too).
    model: scriptedModel([
      { toolCalls: [{ tool: 'create_invoice', input: MASTRA_AGENT_INPUT }] },
      { text: 'done' },
    ]) as never,
    tools: { create_invoice: createInvoice },
  });
  const result = await agent.generate('Invoice cus_mastrakill 43 EUR.', { maxSteps: 3 });
  emit({ event: 'finished', outputs: result.toolResults.map((part) => part.payload.result) });
}

// Imported by the test for its input: run only as a script.
if (require.main === module) {
  main().catch((error: unknown) => {
    emit({ event: 'failed', message: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  });
}
