import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { CallerParam, type Caller } from './caller';
import { WhoAmIDto } from './dto/whoami.dto';

/**
 * What the presented key is: the console shows its role after "Use key" and disables the controls
 * the role may not use, saying why, instead of letting a person fill a form the ledger will refuse.
 */
@ApiTags('operations')
@Controller('v1')
export class WhoAmIController {
  @Get('whoami')
  @RequireAccess('read')
  @ApiOperation({ summary: "The caller's role, tenant and key id." })
  @ApiOkResponse({ type: WhoAmIDto })
  whoami(@CallerParam() caller: Caller): WhoAmIDto {
    return { role: caller.role, tenant: caller.tenant, actor: caller.actor, ...(caller.local ? { local: true } : {}) };
  }
}
