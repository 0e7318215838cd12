import { Body, Controller, Headers, HttpCode, Inject, Post, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiBody, ApiHeader, ApiResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { MAX_OPERATIONS_PER_REQUEST } from '@recovery-ledger/core';
import { RequireAccess } from '../auth/access';
import { CallerParam, type Caller } from './caller';
import { OperatorFactsAnswerDto } from './dto/operator-facts.dto';
import { OperatorFactsService } from './operator-facts.service';
import { readOperatorFactsBody } from './operator-facts.reader';

@ApiTags('operations')
@Controller('v1/operator-facts')
export class OperatorFactsController {
  constructor(@Inject(OperatorFactsService) private readonly facts: OperatorFactsService) {}

  @Post()
  @HttpCode(200)
  @RequireAccess('write')
  @ApiOperation({
    summary: `Record one operator fact (operator keys) on up to ${MAX_OPERATIONS_PER_REQUEST} operations: each decided on its own, as the single submit would, and answered in order.`,
  })
  @ApiBody({ schema: { $ref: '#/components/schemas/OperatorFactsDto' } })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description:
      'As on the submit route: the same key and body answer the first answer again, per-operation refusals included (Idempotent-Replayed: true); ' +
      'the same key with another body is 422 IDEMPOTENCY_KEY_REUSED; while the first is processed, 409 IDEMPOTENCY_KEY_IN_FLIGHT.',
  })
  @ApiOkResponse({
    type: OperatorFactsAnswerDto,
    description:
      'Each operation recorded or refused (a refusal of one is in its result, with its stable code, and leaves the others as they went).',
  })
  @ApiResponse({
    status: 413,
    description: `TOO_MANY_OPERATIONS: more than ${MAX_OPERATIONS_PER_REQUEST} operations; nothing of the request is decided (application/problem+json).`,
  })
  async record(
    @CallerParam() caller: Caller,
    @Body() raw: unknown,
    @Headers() headers: Record<string, string | undefined>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const { answer, replayed } = await this.facts.recordOnce(caller, readOperatorFactsBody(raw), headers);
    if (replayed) reply.header('idempotent-replayed', 'true');
    return answer;
  }
}
