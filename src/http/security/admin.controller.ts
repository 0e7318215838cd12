import { Controller, Get, HttpCode, Inject, Post, Query, StreamableFile } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Readable } from 'node:stream';
import { RequireAccess } from '../../auth/access';
import { CallerParam, type Caller } from '../caller';
import { AdminService } from './admin.service';

/** What only an admin key may do over HTTP (docs/contract.md §8: "admin: rebuild and export"): admin.service.ts. */
@ApiTags('admin')
@Controller('v1/admin')
export class AdminController {
  constructor(@Inject(AdminService) private readonly admin: AdminService) {}

  @Post('verify')
  @HttpCode(200)
  @RequireAccess('admin')
  @ApiOperation({
    summary:
      "Audit the whole log now (chains, anchored heads, the log anchor) and answer what was found in the caller's tenant; the service refuses appends to what is broken.",
  })
  @ApiOkResponse({
    description: "The audit: counts, the caller's tenant's findings, and whether the log as a whole holds.",
  })
  verify(@CallerParam() caller: Caller) {
    return this.admin.verify(caller);
  }

  @Post('projections/rebuild')
  @HttpCode(202)
  @RequireAccess('admin')
  @ApiOperation({
    summary: 'Rebuild projections from zero (all, or the one named); answers at once, reads catch up as it runs.',
  })
  @ApiQuery({ name: 'projection', required: false, type: String })
  @ApiResponse({ status: 202, description: 'The rebuild has started; the projections and their modes.' })
  rebuild(@CallerParam() caller: Caller, @Query('projection') projection?: string) {
    return this.admin.rebuild(caller, projection);
  }

  @Get('export')
  @RequireAccess('admin')
  @ApiOperation({
    summary:
      "The caller's tenant's events as NDJSON (header, events in log order, footer), as `recovery-ledger export` writes them.",
  })
  @ApiProduces('application/x-ndjson')
  @ApiOkResponse({
    description: 'NDJSON; an answer without its footer line was cut short.',
    schema: { type: 'string' },
  })
  async export(@CallerParam() caller: Caller): Promise<StreamableFile> {
    return new StreamableFile(Readable.from(await this.admin.export(caller)), {
      type: 'application/x-ndjson; charset=utf-8',
    });
  }
}
