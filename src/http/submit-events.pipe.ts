import { Inject, Injectable, type PipeTransform } from '@nestjs/common';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import type { SubmitRequest } from '@recovery-ledger/core';
import { readSubmitBody } from './submit-body.reader';

/** The submit route's body, read by ./submit-body.reader.ts within the service's events-per-submit limit. */
@Injectable()
export class SubmitEventsPipe implements PipeTransform<unknown, SubmitRequest> {
  constructor(@Inject(CONFIG) private readonly config: LedgerConfig) {}

  transform(body: unknown): SubmitRequest {
    return readSubmitBody(body, this.config.maxEventsPerSubmit);
  }
}
