import { Inject, Injectable, Optional } from '@nestjs/common';
import {
  isTerminalStatus,
  type SubmitAnswer,
  type SubmitCommand,
  type SubmitContext,
  type SubmitRequest,
} from '@recovery-ledger/core';
import { checkFactPermissions } from '../auth/fact-permissions';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { WorkFeed, type LeaseEvidenceAnswer } from '../work/work-feed';
import type { Caller } from './caller';
import { submitContext } from './operations.queries';
import { leaseHeader } from './work-requests';

/**
 * A submit request as the one command the ledger takes, resolved in one place: the caller's right
 * to record each fact (docs/contract.md §8), the trace context, and the work-feed lease it came
 * under with that lease's evidence (docs/work-feed.md). Anything refused here stores nothing.
 */
@Injectable()
export class SubmitCommandResolver {
  constructor(
    @Inject(CONFIG) private readonly config: LedgerConfig,
    @Optional() @Inject(WorkFeed) private readonly work?: WorkFeed,
  ) {}

  async resolve(
    caller: Caller,
    ref: string,
    headers: Record<string, string | undefined>,
    request: SubmitRequest,
  ): Promise<SubmitCommand> {
    checkFactPermissions(caller, request.events, { selfApproval: this.config.allowSelfApproval });
    const context = submitContext(caller, ref, headers);
    const leaseId = this.work ? leaseHeader(headers['ledger-lease']) : undefined;
    const evidence =
      leaseId === undefined ? undefined : await this.work?.leaseEvidence(caller, context.operationRef, leaseId);
    return { context: { ...context, ...leaseContext(evidence) }, request };
  }

  /**
   * Facts sent under the lease that holds the step ended it: no attempt of a finished step can be
   * granted again, so nothing its lease guards is left, and the ledger gives it back in the same
   * request (docs/contract.md §9, "A lease ends with its step"). A release that fails changes
   * nothing of what was stored: the worker then releases it itself, or it expires.
   */
  async releaseFinished(caller: Caller, command: SubmitCommand, answer: SubmitAnswer): Promise<SubmitAnswer> {
    const lease = command.context.lease;
    if (!this.work || !lease?.current || !isTerminalStatus(answer.state.status)) return answer;
    try {
      const { released } = await this.work.release(caller, command.context.operationRef, { leaseId: lease.lease_id });
      return released ? { ...answer, lease_released: true } : answer;
    } catch {
      return answer;
    }
  }
}

/** The lease a submit came under: its evidence is stored with the facts; its end only bounds a dispatch. */
function leaseContext(evidence: LeaseEvidenceAnswer | undefined): Pick<SubmitContext, 'lease' | 'leaseExpiresAt'> {
  if (!evidence) return {};
  const { expires_at: leaseExpiresAt, ...lease } = evidence;
  return { lease, ...(leaseExpiresAt === undefined ? {} : { leaseExpiresAt }) };
}
