import type { ToolEnvelope } from '@recovery-ledger/core';
import {
  inputFieldsOf,
  type Lookup,
  normalizeHttpResponse,
  type ToolCall,
  type ToolCallContext,
} from '@recovery-ledger/client';

export interface InvoiceInput {
  customer_id: string;
  amount_cents: number;
}

/** What the provider does with one call: answer it, or fail it in one of the contract's ways. */
export type Behaviour =
  | { kind: 'ok' }
  /** The invoice is created, then the connection breaks: the caller cannot know. */
  | { kind: 'commit_then_reset' }
  /** The connection breaks before anything is created. */
  | { kind: 'reset_before_commit' }
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: unknown };

/**
 * A provider that honours idempotency keys in memory (one invoice per key), for the unit tests of
 * executeWrite and recover. Its answers go through the real HTTP normalizer, as an adapter would.
 */
export class KeyedInvoiceProvider {
  readonly invoices = new Map<string, { id: string; input: InvoiceInput }>();
  readonly calls: Array<{ input: InvoiceInput; context: ToolCallContext }> = [];
  private readonly script: Behaviour[] = [];

  constructor(private readonly now: () => Date) {}

  /** The behaviours of the next calls, in order; after them every call is `ok`. */
  then(...behaviours: Behaviour[]): this {
    this.script.push(...behaviours);
    return this;
  }

  readonly createInvoice: ToolCall<InvoiceInput> = async (input, context) => {
    this.calls.push({ input, context });
    const behaviour = this.script.shift() ?? { kind: 'ok' };
    const options = {
      operationRef: context.operationRef,
      sideEffect: context.sideEffect,
      now: this.now(),
      inputFields: inputFieldsOf(input),
    };
    if (behaviour.kind === 'reset_before_commit') throw resetError();
    if (behaviour.kind === 'status') {
      return normalizeHttpResponse(
        { status: behaviour.status, headers: behaviour.headers, body: behaviour.body },
        options,
      );
    }
    const invoice = this.commit(context.idempotencyKey, input);
    if (behaviour.kind === 'commit_then_reset') throw resetError();
    return normalizeHttpResponse({ status: 201, body: invoice }, options) as ToolEnvelope;
  };

  readonly lookup: Lookup = async (operationRef) => {
    const invoice = this.invoices.get(operationRef);
    return invoice ? { found: true, evidenceRef: invoice.id, result: invoice } : { found: false };
  };

  private commit(key: string, input: InvoiceInput) {
    const existing = this.invoices.get(key);
    if (existing) return existing;
    const invoice = { id: `inv_${this.invoices.size + 1}`, input };
    this.invoices.set(key, invoice);
    return invoice;
  }
}

/** What Node 20's fetch throws when the peer drops the connection mid-request. */
function resetError(): Error {
  const cause = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
  return Object.assign(new TypeError('fetch failed'), { cause });
}
