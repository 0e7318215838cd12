/**
 * An OpenAI Agents SDK agent whose create_invoice goes through the ledger
 * (@recovery-ledger/agent-frameworks/openai-agents). With OPENAI_API_KEY set it uses the SDK's
 * default OpenAI model; without, a model scripted to ask for the same invoice twice, which shows
 * the ledger's answer to a repeated write: the first call creates, the second reads it back.
 *
 *   node dist/examples/agent-frameworks/openai-agents-invoice.js --run run_oa [--ledger http://127.0.0.1:3000]
 *     [--provider http://127.0.0.1:4010]        (LEDGER_API_KEY: a runtime key)
 */
import { Agent, Usage, run, setTracingDisabled, type Model, type ModelResponse } from '@openai/agents';
import { z } from 'zod';
import { LedgerClient } from '@recovery-ledger/client';
import { ledgeredAgentsTool, ledgerOutputOf } from '@recovery-ledger/agent-frameworks/openai-agents';
import { invoiceTools } from '../invoice-tools';
import { exitOnHelp } from '../example-cli';

function flag(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : fallback;
}

const INPUT = { customer_id: 'cus_example', amount_cents: 2500, currency: 'EUR' };

/** Two turns asking for the same invoice, then a final answer (no API key needed). */
function scriptedModel(): Model {
  let turn = 0;
  const call = (n: number): ModelResponse => ({
    usage: new Usage(),
    output: [
      {
        type: 'function_call',
        callId: `call_${n}`,
        name: 'create_invoice',
        arguments: JSON.stringify(INPUT),
        status: 'completed',
      },
    ],
  });
  return {
    getResponse: async () =>
      ++turn <= 2
        ? call(turn)
        : {
            usage: new Usage(),
            output: [
              {
                type: 'message',
                role: 'assistant',
                status: 'completed',
                content: [{ type: 'output_text', text: 'Invoiced.' }],
              },
            ],
          },
    // eslint-disable-next-line require-yield
    getStreamedResponse: async function* () {
      throw new Error('not streamed');
    },
  };
}

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const runId = flag('run', 'run_oa');
  const ledger = new LedgerClient({
    baseUrl: flag('ledger', 'http://127.0.0.1:3000'),
    apiKey: process.env.LEDGER_API_KEY,
  });
  const { createInvoice, lookup } = invoiceTools(flag('provider', 'http://127.0.0.1:4010'));
  if (!process.env.OPENAI_API_KEY) setTracingDisabled(true);
  const agent = new Agent({
    name: 'billing',
    instructions: `Invoice ${INPUT.customer_id} ${INPUT.amount_cents / 100} ${INPUT.currency}.`,
    ...(process.env.OPENAI_API_KEY ? {} : { model: scriptedModel() }),
    tools: [
      ledgeredAgentsTool({
        ledger,
        name: 'create_invoice',
        description: 'Creates an invoice for a customer.',
        runId,
        policy: { max_attempts: 3, consistency_window_ms: 30_000 },
        call: createInvoice,
        lookup,
        parameters: z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() }),
      }),
    ],
  });
  const result = await run(agent, 'Invoice the customer.', { maxTurns: 5 });
  for (const item of result.newItems) {
    const output = ledgerOutputOf(item);
    if (!output) continue;
    console.log(JSON.stringify({ status: output.status, operation_ref: output.operation_ref }));
    console.log(`  the model read: ${output.model_text.split('\n')[0]}`);
  }
  console.log(`final: ${String(result.finalOutput)}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
});
