import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBody, ApiOkResponse, ApiOperation, ApiParam, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { WorkFeed } from '../work/work-feed';
import { CallerParam, type Caller } from './caller';
import { checkOperationRef } from './operation-ref';
import type { QueryParams } from './read-queries';
import { LongPoll } from './security/long-poll-limit';
import { leaseListRefs, refuseSecretWorker, releaseRequest, renewRequest, workRequest } from './work-requests';
import {
  LeaseViewDto,
  LeaseListDto,
  WorkAnswerDto,
  RenewLeaseDto,
  RenewAnswerDto,
  ReleaseLeaseDto,
  ReleaseAnswerDto,
} from './dto/work.dto';

interface RequestWithSocket {
  raw?: { socket?: { destroyed?: boolean } };
}

@ApiTags('work')
@Controller('v1')
export class WorkController {
  constructor(@Inject(WorkFeed) private readonly feed: WorkFeed) {}

  @Get('work')
  @RequireAccess('work')
  @LongPoll('wait_ms')
  @ApiOperation({
    summary: 'Long-poll for due steps (dispatch or verify), each handed out under a lease to one worker at a time.',
  })
  @ApiQuery({
    name: 'worker',
    required: false,
    type: String,
    description: "The name the worker holds leases under (default: the key's id).",
  })
  @ApiQuery({
    name: 'tool',
    required: false,
    type: String,
    isArray: true,
    description: 'Only these tools (repeat the parameter); all when absent.',
  })
  @ApiQuery({ name: 'limit', required: false, type: Number, description: '1 to 100 (default 10).' })
  @ApiQuery({
    name: 'wait_ms',
    required: false,
    type: Number,
    description: 'Wait up to this long for an item (0 to 30000, default 0).',
  })
  @ApiQuery({
    name: 'lease_ms',
    required: false,
    type: Number,
    description: 'Lease length, 1000 to 600000 (default 30000).',
  })
  @ApiOkResponse({ type: WorkAnswerDto })
  async work(@CallerParam() caller: Caller, @Query() query: QueryParams, @Req() request: RequestWithSocket) {
    const asked = workRequest(caller, query, this.feed.settings);
    if (asked.worker !== caller.actor) await refuseSecretWorker(asked.worker);
    return this.feed.take(caller, asked, () => request.raw?.socket?.destroyed === true);
  }

  // Any reader of the tenant may see who holds an item; the lease id stays with its holder, since it
  // is all renew and release ask for.
  @Get('operations/:ref/lease')
  @RequireAccess('read')
  @ApiParam({ name: 'ref', description: 'The operation_ref, percent-encoded as one path segment.' })
  @ApiOperation({
    summary:
      'Which worker holds the operation now under a work-feed lease, and until when (the lease id is not shown).',
  })
  @ApiOkResponse({ type: LeaseViewDto })
  lease(@CallerParam() caller: Caller, @Param('ref') ref: string) {
    return this.feed.holderOf(caller, checkOperationRef(ref));
  }

  @Get('leases')
  @RequireAccess('read')
  @ApiOperation({
    summary:
      'Who holds each of up to 100 operations of the tenant now, in one read (for a list page); unknown refs read as not held.',
  })
  @ApiQuery({
    name: 'operation_ref',
    required: true,
    type: String,
    isArray: true,
    description: 'Repeat the parameter, up to 100 times.',
  })
  @ApiOkResponse({ type: LeaseListDto })
  leases(@CallerParam() caller: Caller, @Query() query: QueryParams) {
    return this.feed.holdersOf(caller, leaseListRefs(query));
  }

  @Post('operations/:ref/lease/renew')
  @HttpCode(200)
  @RequireAccess('work')
  @ApiParam({ name: 'ref', description: 'The operation_ref, percent-encoded as one path segment.' })
  @ApiOperation({ summary: 'Extend a work-feed lease; 409 LEASE_LOST when it no longer holds the item.' })
  @ApiBody({ type: RenewLeaseDto })
  @ApiOkResponse({ type: RenewAnswerDto })
  renew(@CallerParam() caller: Caller, @Param('ref') ref: string, @Body() body: unknown) {
    const operationRef = checkOperationRef(ref);
    return this.feed.renew(caller, operationRef, renewRequest(body, this.feed.settings));
  }

  @Post('operations/:ref/lease/release')
  @HttpCode(200)
  @RequireAccess('work')
  @ApiParam({ name: 'ref', description: 'The operation_ref, percent-encoded as one path segment.' })
  @ApiOperation({ summary: 'Give a work-feed lease back, optionally keeping the item from everyone for hold_ms.' })
  @ApiBody({ type: ReleaseLeaseDto })
  @ApiOkResponse({ type: ReleaseAnswerDto })
  release(@CallerParam() caller: Caller, @Param('ref') ref: string, @Body() body: unknown) {
    const operationRef = checkOperationRef(ref);
    return this.feed.release(caller, operationRef, releaseRequest(body));
  }
}
