import { Inject, Injectable, Optional } from '@nestjs/common';
import type { SubmitAnswer, SubmitContext, SubmitRequest } from '@recovery-ledger/core';
import { checkFactPermissions } from '../auth/fact-permissions';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { SubmitCommandHandler } from '../ledger/submit-command.handler';
import { WorkFeed, type LeaseEvidenceAnswer } from '../work/work-feed';
import type { Caller } from './caller';
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
    @Optional() @Inject(WorkFeed) private readonly work?: WorkFeed,
  ) {}

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
