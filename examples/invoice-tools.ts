/**
 * The adapter a runtime writes once per provider: the write tool, answering envelopes, and the
 * lookup by operation_ref that verification and recovery use. Everything else is the SDK's.
 */
import { callHttpTool, type Lookup, type ToolCall } from '@recovery-ledger/client';

export interface InvoiceInput {
  customer_id: string;
  amount_cents: number;
  currency: string;
}

export interface InvoiceToolsOptions {
  /** For the whole call; past it, a write's outcome is unknown and gets verified (default 5 s). */
  timeoutMs?: number;
}

export const CREATE_INVOICE = 'create_invoice';
export const VERIFICATION_TOOL = 'get_invoice_by_operation_ref';

export function invoiceTools(providerUrl: string, options: InvoiceToolsOptions = {}) {
  const base = providerUrl.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 5000;

  /** POST /invoices with the operation_ref as Idempotency-Key: one invoice per step, however often it is sent. */
  const createInvoice: ToolCall<InvoiceInput> = (input, context) =>
    callHttpTool(
      {
        url: `${base}/invoices`,
        method: 'POST',
        body: input,
        timeoutMs,
        idempotencyHeader: 'Idempotency-Key',
        signal: context.signal,
        callWindow: context.callWindow,
      },
      {
        operationRef: context.idempotencyKey,
        sideEffect: context.sideEffect,
        verificationTool: VERIFICATION_TOOL,
        evidenceRef: (body) => (body as { id?: string } | undefined)?.id,
      },
    );

  /** GET /invoices?operation_ref=: found (with the invoice id as evidence) or not; a throw is "cannot tell". */
  const lookup: Lookup = async (operationRef) => {
    const response = await fetch(`${base}/invoices?operation_ref=${encodeURIComponent(operationRef)}`, {
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) throw new Error(`lookup answered ${response.status}`);
    const body = (await response.json()) as { items?: Array<{ id: string; operation_ref: string }> };
    if (!Array.isArray(body.items)) throw new Error('lookup answered an unexpected shape');
    const invoice = body.items.find((item) => item.operation_ref === operationRef);
    return invoice ? { found: true, evidenceRef: invoice.id, result: invoice } : { found: false };
  };

  return { createInvoice, lookup };
}
