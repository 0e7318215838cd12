/**
 * The Mastra integration, runnable on loopback without a model provider: a Mastra Agent on a
 * scripted model (the AI SDK's MockLanguageModelV4, which Mastra runs) asks for the same invoice
 * twice; the ledgered tool creates it once and answers the model the envelope's words. Put your
 * own model in `model` for a real agent.
 *
 *   node dist/examples/agent-frameworks/mastra-invoice.js --ledger http://127.0.0.1:3000 \
 *     --provider http://127.0.0.1:4010 [--run run-1] [--key KEY]
 *
 * The provider is the example one (node dist/examples/invoice-provider/main.js); --key is a
 * runtime key of the ledger (none in local mode). Each line printed is one JSON object.
 */
import { Agent } from '@mastra/core/agent';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';
import { ledgeredMastraTool, ledgerOutputOf } from '@recovery-ledger/agent-frameworks/mastra';
import { LedgerClient } from '@recovery-ledger/client';
import { exitOnHelp, flag, log } from '../example-cli';
import { invoiceTools } from '../invoice-tools';

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
const INVOICE = { customer_id: 'cus_example', amount_cents: 1200, currency: 'EUR' };

/** A model that asks for the invoice twice (as a confused model might), then answers a text. */
function scriptedModel(): MockLanguageModelV4 {
  let step = 0;
  return new MockLanguageModelV4({
    doGenerate: async () => {
      step++;
      if (step > 2)
        return {
          content: [{ type: 'text', text: 'Done.' }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage,
          warnings: [],
        };
      const call = {
        type: 'tool-call' as const,
        toolCallId: `call_${step}`,
        toolName: 'create_invoice',
        input: JSON.stringify(INVOICE),
      };
      return { content: [call], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] };
    },
  });
}

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const ledgerUrl = flag('ledger') ?? 'http://127.0.0.1:3000';
  const providerUrl = flag('provider') ?? 'http://127.0.0.1:4010';
  const runId = flag('run') ?? `mastra-example-${Date.now()}`;
  const key = flag('key');
  const ledger = new LedgerClient({ baseUrl: ledgerUrl, ...(key ? { apiKey: key } : {}) });
  const { createInvoice, lookup } = invoiceTools(providerUrl);
  const agent = new Agent({
    id: 'invoicer',
    name: 'invoicer',
    instructions: 'Create the invoices asked for.',
    // ai 7's test model speaks a newer provider spec than the copy Mastra bundles (a finish reason
    // 'interrupted'); a provider's model, or a model id such as 'openai/gpt-4.1', needs no cast.
    model: scriptedModel() as never,
    tools: {
      create_invoice: ledgeredMastraTool({
        ledger,
        name: 'create_invoice',
        description: 'Creates an invoice for a customer.',
        runId,
        inputSchema: z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() }),
        policy: { max_attempts: 3, consistency_window_ms: 30_000 },
        call: createInvoice,
        lookup,
      }),
    },
  });
  const result = await agent.generate('Invoice cus_example 12 EUR.', { maxSteps: 4 });
  for (const part of result.toolResults) log({ event: 'tool_result', model_saw: ledgerOutputOf(part)?.model_text });
  log({ event: 'finished', text: result.text });
}

main().catch((error: unknown) => {
  log({ event: 'failed', message: error instanceof Error ? error.message : String(error) });
  process.exit(1);
});
