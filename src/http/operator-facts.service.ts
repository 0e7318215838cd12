import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  LedgerProblem,
  type OperationProblem,
  type OperatorFactOutcome,
  type OperatorFactsAnswer,
  type OperatorFactsRequest,
} from '@recovery-ledger/core';
import { checkFactPermissions } from '../auth/fact-permissions';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { SubmitCommandHandler } from '../ledger/submit-command.handler';
import type { Caller } from './caller';
import { IdempotencyKeys, parseIdempotencyKey } from './idempotency-keys';
import { problemBody } from './problem-body';
import { toLedgerProblem } from './problem.filter';
import { SubmitCommandResolver } from './submit-command.resolver';

/**
 * One operator fact over many operations (docs/contract.md §9, "Operator facts over many
 * operations"). Whatever concerns the request as a whole is decided first and refuses all of it:
 * the caller's right to record the fact (403) and a log that takes no write. Then each operation
 * goes the single submit's one command path, in the order named, as one submit of one fact: its
 * own decision, its own append, so nothing is partial within it and one refusal leaves the others
 * as they went. Each answer or refusal is the one the single route would have given.
 */
@Injectable()
export class OperatorFactsService {
  private readonly logger = new Logger('OperatorFacts');

  constructor(
    @Inject(SubmitCommandHandler) private readonly commands: SubmitCommandHandler,
    @Inject(SubmitCommandResolver) private readonly resolver: SubmitCommandResolver,
    @Inject(IdempotencyKeys) private readonly idempotencyKeys: IdempotencyKeys,
    @Inject(CONFIG) private readonly config: LedgerConfig,
  ) {}

  /** As the submit route: under an Idempotency-Key, the same key and body answer the first answer again. */
  async recordOnce(
    caller: Caller,
    body: OperatorFactsRequest,
    headers: Record<string, string | undefined>,
  ): Promise<{ answer: unknown; replayed: boolean }> {
    const record = () => this.record(caller, body, headers);
    const key = parseIdempotencyKey(headers['idempotency-key']);
    if (key === undefined) return { answer: await record(), replayed: false };
    // Before a kept answer is replayed: on a rolled-back log it may grant what the log no longer holds.
    this.refuseWrites();
    return this.idempotencyKeys.run(caller, key, { method: 'POST', route: '/v1/operator-facts', body }, record);
  }

  /** A log rolled back decides no write (docs/security.md): the whole request is refused, nothing decided. */
  refuseWrites(): void {
    const refusal = this.commands.writeRefusal();
    if (refusal) throw refusal;
  }

  async record(
    caller: Caller,
    body: OperatorFactsRequest,
    headers: Record<string, string | undefined>,
  ): Promise<OperatorFactsAnswer> {
    try {
      checkFactPermissions(caller, [body.fact], { selfApproval: this.config.allowSelfApproval });
    } catch (error) {
      if (error instanceof LedgerProblem) throw new LedgerProblem(error.code, error.detail, { field: 'fact.type' });
      throw error;
    }
    this.refuseWrites();
    // The trace context applies to every operation; a work-feed lease holds one step, never a list.
    const trace = { traceparent: headers.traceparent, tracestate: headers.tracestate };
    const results: OperatorFactOutcome[] = [];
    for (const { operation_ref, event_id } of body.operations) {
      // Each copy of the fact is its own: what one submit does to its data stays in that submit.
      const request = { events: [{ event_id, type: body.fact.type, data: structuredClone(body.fact.data) }] };
      try {
        const answer = await this.resolver.submit(caller, operation_ref, trace, request);
        results.push({ operation_ref, event_id, outcome: 'recorded', answer });
      } catch (error) {
        results.push(this.refused(operation_ref, event_id, error));
      }
    }
    const recorded = results.filter((result) => result.outcome === 'recorded').length;
    return { recorded, refused: results.length - recorded, results };
  }

  private refused(operationRef: string, eventId: string, error: unknown): OperatorFactOutcome {
    const problem = toLedgerProblem(error);
    if (problem.code === 'INTERNAL_ERROR') this.logger.error({ err: error }, 'unexpected error on one operation');
    // A ref that looks like a credential is never echoed, as the single route never echoes it.
    const echo = !(problem.code === 'SECRET_IN_IDENTIFIER' && problem.extras.field === 'operation_ref');
    return {
      ...(echo ? { operation_ref: operationRef } : {}),
      event_id: eventId,
      outcome: 'refused',
      problem: problemBody(problem) as unknown as OperationProblem,
    };
  }
}
