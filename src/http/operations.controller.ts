import { Body, Controller, Get, Headers, HttpCode, Inject, Param, Post, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiBody, ApiHeader, ApiOkResponse, ApiOperation, ApiParam, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import type { SubmitRequest } from '@recovery-ledger/core';
import { CallerParam, type Caller } from './caller';
import { OperationEventsDto, StepViewDto, SubmitAnswerDto } from './dto/responses.dto';
import { OperationsQueries } from './operations.queries';
import type { QueryParams } from './read-queries';
import { READ_TURNS } from './read-turns';
import { SubmitCommandResolver } from './submit-command.resolver';
import { SubmitEventsPipe } from './submit-events.pipe';

@ApiTags('operations')
@ApiParam({ name: 'ref', description: 'The operation_ref, percent-encoded as one path segment (run_81%2Fstep_4).' })
@Controller('v1/operations')
export class OperationsController {
  constructor(
    @Inject(SubmitCommandResolver) private readonly resolver: SubmitCommandResolver,
    @Inject(OperationsQueries) private readonly queries: OperationsQueries,
  ) {}

  @Post(':ref/events')
  @HttpCode(200)
  @RequireAccess('write')
  @ApiOperation({ summary: 'Submit facts; the ledger decides and records what they cause, or refuses them.' })
  @ApiBody({ schema: { $ref: '#/components/schemas/SubmitEventsDto' } })
  @ApiHeader({
    name: 'Ledger-Lease',
    required: false,
    description: 'The work-feed lease the facts are submitted under: recorded as evidence of which worker acted.',
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description:
      'draft-ietf-httpapi-idempotency-key-header: the same key and body answer the first 2xx answer again (Idempotent-Replayed: true); ' +
      'the same key with another body is 422 IDEMPOTENCY_KEY_REUSED; while the first is processed, 409 IDEMPOTENCY_KEY_IN_FLIGHT. Kept 24 hours, per tenant and API key.',
  })
  @ApiOkResponse({ type: SubmitAnswerDto })
  async submit(
    @CallerParam() caller: Caller,
    @Param('ref') ref: string,
    @Body(SubmitEventsPipe) body: SubmitRequest,
    @Headers() headers: Record<string, string | undefined>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const { answer, replayed } = await this.resolver.submitOnce(caller, ref, headers, body);
    if (replayed) reply.header('idempotent-replayed', 'true');
    return answer;
  }

  @Get(':ref')
  @RequireAccess('read')
  @ApiOperation({ summary: 'The current step state, folded from the stream (strongly consistent).' })
  @ApiOkResponse({ type: StepViewDto })
  state(@CallerParam() caller: Caller, @Param('ref') ref: string) {
    return READ_TURNS.run(() => this.queries.state(caller, ref));
  }

  @Get(':ref/events')
  @RequireAccess('read')
  @ApiOperation({ summary: "The stream's events in order; with as_of_revision, also the state folded up to it." })
  @ApiQuery({ name: 'as_of_revision', required: false, type: Number })
  @ApiQuery({ name: 'limit', required: false, type: Number, description: 'Events per page, 1–500 (default 100).' })
  @ApiQuery({ name: 'cursor', required: false, type: String, description: 'The next_cursor of the page before.' })
  @ApiOkResponse({ type: OperationEventsDto })
  events(@CallerParam() caller: Caller, @Param('ref') ref: string, @Query() query: QueryParams) {
    return READ_TURNS.run(() => this.queries.events(caller, ref, query));
  }
}
