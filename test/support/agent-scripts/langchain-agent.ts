/**
 * A LangChain agent as its own process, for the SIGKILL test:
 *   node --require ./test/chaos/swc-register.cjs test/support/agent-scripts/langchain-agent.ts --run RUN --checkpoints FILE [--resume]
 * (AGENT_LEDGER_URL and AGENT_PROVIDER_URL from runAgentScript). Its fake model asks for one
 * invoice, then answers a text. With --resume it is LangGraph's own resume: invoke(null) on the same
 * thread, from the checkpoints the killed process wrote, which runs the pending tool call again.
 */
import { tool, createAgent, FakeToolCallingModel } from 'langchain';
import { z } from 'zod';
import { ledgerAttempt, ledgerMiddleware } from '@recovery-ledger/agent-frameworks/langchain';
import { agentWorldFromEnv, emit } from '../agent-framework-harness';
import { FileSaver } from '../langgraph-file-saver';

export const AGENT_INPUT = { customer_id: 'cus_lckill', amount_cents: 4300, currency: 'EUR' };

async function main(): Promise<void> {
  const arg = (name: string) => process.argv[process.argv.indexOf(name) + 1];
  const run = arg('--run');
  // A call window long enough for the provider's slow answer: the process dies inside it.
  const world = agentWorldFromEnv({ callTimeoutMs: 10_000 });
  const createInvoice = tool((input) => world.createInvoice(input, ledgerAttempt()), {
    name: 'create_invoice',
    description: 'Creates an invoice.',
    schema: z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() }),
  });
  const { call: _call, ...write } = world.writeTool();
  const agent = createAgent({
    model: new FakeToolCallingModel({
      toolCalls: [[{ name: 'create_invoice', args: AGENT_INPUT, id: 'call_kill_1', type: 'tool_call' }], []],
    }),
    tools: [createInvoice],
    middleware: [
      ledgerMiddleware({
        create_invoice: {
          ...write,
          ledger: world.runtime,
          name: 'create_invoice',
          runId: run,
          log: (line) => emit(line),
        },
      }),
    ],
    checkpointer: new FileSaver(arg('--checkpoints')),
  });
  emit({ event: 'started', run });
  const config = { configurable: { thread_id: run } };
  const state = process.argv.includes('--resume')
    ? await agent.invoke(null as never, config)
    : await agent.invoke({ messages: [{ role: 'user', content: 'Invoice cus_lckill 43 EUR.' }] }, config);
  const answers = state.messages
    .filter((message) => message.getType() === 'tool')
    .map((message) => (message as unknown as { artifact: unknown }).artifact);
  emit({ event: 'finished', answers });
}

// Imported by the test for AGENT_INPUT: run only as a script.
if (require.main === module) {
  main().catch((error: unknown) => {
    emit({ event: 'failed', message: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  });
}
