import { Inject, Injectable, Optional } from '@nestjs/common';
import type { SubmitAnswer, SubmitContext, SubmitRequest } from '@recovery-ledger/core';
import { checkFactPermissions } from '../auth/fact-permissions';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { SubmitCommandHandler } from '../ledger/submit-command.handler';
import { WorkFeed, type LeaseEvidenceAnswer } from '../work/work-feed';
import type { Caller } from './caller';
import { IdempotencyKeys, parseIdempotencyKey } from './idempotency-keys';
import { checkOperationRef } from './operation-ref';
import { submitContext } from './operations.queries';
import { leaseHeader } from './work-requests';

/**
 * A submit request as the one command the ledger takes, resolved in one place and run: the caller's
 * right to record each fact (docs/contract.md §8), the trace context, and the work-feed lease it came
 * under, whose evidence the work feed reads and whose end it handles around the command, in one call
 * (docs/work-feed.md). Anything refused before the command runs stores nothing.
 */
@Injectable()
export class SubmitCommandResolver {
  constructor(
    @Inject(CONFIG) private readonly config: LedgerConfig,
    @Inject(SubmitCommandHandler) private readonly commands: SubmitCommandHandler,
    @Inject(IdempotencyKeys) private readonly idempotencyKeys: IdempotencyKeys,
    @Optional() @Inject(WorkFeed) private readonly work?: WorkFeed,
  ) {}

  /**
   * `POST /v1/operations/{ref}/events`: with an `Idempotency-Key`, the same key and body answer the
   * first answer again (`replayed`), checked against a rolled-back log first, since a kept answer
   * may grant what the log no longer holds (docs/security.md).
   */
  async submitOnce(
    caller: Caller,
    ref: string,
    headers: Record<string, string | undefined>,
    request: SubmitRequest,
  ): Promise<{ answer: unknown; replayed: boolean }> {
    const submit = () => this.submit(caller, ref, headers, request);
    const key = parseIdempotencyKey(headers['idempotency-key']);
    if (key === undefined) return { answer: await submit(), replayed: false };
    const refusal = this.commands.writeRefusal();
    if (refusal) throw refusal;
    const route = `/v1/operations/${checkOperationRef(ref)}/events`;
    return this.idempotencyKeys.run(caller, key, { method: 'POST', route, body: request }, submit);
  }

  async submit(
    caller: Caller,
    ref: string,
    headers: Record<string, string | undefined>,
    request: SubmitRequest,
  ): Promise<SubmitAnswer> {
    checkFactPermissions(caller, request.events, { selfApproval: this.config.allowSelfApproval });
    const context = submitContext(caller, ref, headers);
    const leaseId = this.work ? leaseHeader(headers['ledger-lease']) : undefined;
    if (!this.work || leaseId === undefined) return this.commands.submit({ context, request });
    return this.work.submitUnderLease(caller, context.operationRef, leaseId, (evidence) =>
      this.commands.submit({ context: { ...context, ...leaseContext(evidence) }, request }),
    );
  }
}

/** The lease a submit came under: its evidence is stored with the facts; its end only bounds a dispatch. */
function leaseContext(evidence: LeaseEvidenceAnswer): Pick<SubmitContext, 'lease' | 'leaseExpiresAt'> {
  const { expires_at: leaseExpiresAt, ...lease } = evidence;
  return { lease, ...(leaseExpiresAt === undefined ? {} : { leaseExpiresAt }) };
}
