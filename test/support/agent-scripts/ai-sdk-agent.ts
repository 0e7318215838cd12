/**
 * An AI SDK agent as its own process, for the SIGKILL test:
 *   node --require ./test/chaos/swc-register.cjs test/support/agent-scripts/ai-sdk-agent.ts --run RUN
 * (AGENT_LEDGER_URL and AGENT_PROVIDER_URL from runAgentScript). Its scripted model asks for one
 * invoice, then answers a text. Run again with the same --run, it is the AI SDK's resume: the same
 * generateText over the same conversation, which reaches the same operation_ref.
 */
import { generateText, stepCountIs } from 'ai';
import { z } from 'zod';
import { ledgeredTool } from '@recovery-ledger/agent-frameworks/ai-sdk';
import { agentWorldFromEnv, emit } from '../agent-framework-harness';
import { scriptedModel } from '../ai-sdk-scripted-model';

export const AGENT_INPUT = { customer_id: 'cus_kill', amount_cents: 4200, currency: 'EUR' };

async function main(): Promise<void> {
  const run = process.argv[process.argv.indexOf('--run') + 1];
  // A call window long enough for the provider's slow answer: the process dies inside it.
  const world = agentWorldFromEnv({ callTimeoutMs: 10_000 });
  const createInvoice = ledgeredTool({
    ...world.writeTool(),
    ledger: world.runtime,
    name: 'create_invoice',
    runId: run,
    inputSchema: z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() }),
    log: (line) => emit(line),
  });
  emit({ event: 'started', run });
  const result = await generateText({
    model: scriptedModel([{ toolCalls: [{ tool: 'create_invoice', input: AGENT_INPUT }] }, { text: 'done' }]),
    tools: { create_invoice: createInvoice },
    prompt: 'Invoice cus_kill 42 EUR.',
    stopWhen: stepCountIs(3),
  });
  const outputs = result.steps.flatMap((step) => step.toolResults.map((part) => part.output));
  emit({ event: 'finished', outputs });
}

// Imported by the test for AGENT_INPUT: run only as a script.
if (require.main === module) {
  main().catch((error: unknown) => {
    emit({ event: 'failed', message: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  });
}
