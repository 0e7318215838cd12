import { Inject, Injectable, type PipeTransform } from '@nestjs/common';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { LedgerProblem } from '../errors/ledger-problem';
import type { SubmitRequest } from '../contract/ledger-api.types';
import { FACT_DATA_DTOS, SubmitEventsDto } from './dto/submit-events.dto';
import { ledgerValidationPipe, validatePlain } from './validation';

/**
 * class-transformer skips keys named like Object.prototype members (`toString`, `valueOf`, …), so
 * the whitelist never sees them: refuse them here, everywhere but in the free-form parts (the
 * envelope, checked field by field against its own list, and a verification's `result`).
 */
function refuseInheritedNames(value: unknown, path: string): void {
  if (value === null || typeof value !== 'object') return;
  if (path.endsWith('.envelope') || path.endsWith('.result')) return;
  for (const [key, member] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
    if (!Array.isArray(value) && (key in Object.prototype || key === 'prototype')) {
      throw new LedgerProblem('BAD_REQUEST', `${at} should not exist`, { field: at });
    }
    refuseInheritedNames(member, at);
  }
}

/** The submit body: its outer shape, then each event's data by its type, each error naming the field. */
@Injectable()
export class SubmitEventsPipe implements PipeTransform<unknown, Promise<SubmitRequest>> {
  private readonly outer = ledgerValidationPipe();

  constructor(@Inject(CONFIG) private readonly config: LedgerConfig) {}

  async transform(body: unknown): Promise<SubmitRequest> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object', { field: 'body' });
    }
    refuseInheritedNames(body, '');
    // class-transformer turns an array where an event should be into something the validator
    // cannot name a field of (`{"events":[[]]}` was a 500): refuse each such shape here, by index.
    const submitted = (body as { events?: unknown }).events;
    if (Array.isArray(submitted)) {
      submitted.forEach((event, index) => {
        if (event === null || typeof event !== 'object' || Array.isArray(event)) {
          throw new LedgerProblem('BAD_REQUEST', `events[${index}] must be an object`, { field: `events[${index}]` });
        }
      });
    }
    const checked = (await this.outer.transform(body, { type: 'body', metatype: SubmitEventsDto })) as SubmitEventsDto;
    if (checked.events.length > this.config.maxEventsPerSubmit) {
      throw new LedgerProblem('BAD_REQUEST', `at most ${this.config.maxEventsPerSubmit} events per submit`, { field: 'events' });
    }
    const raw = body as { events: Array<{ data: unknown }> };
    const ids = new Set<string>();
    const events = checked.events.map((event, index) => {
      // UUIDs compare case-insensitively; the ledger stores them lower-case.
      const eventId = event.event_id.toLowerCase();
      if (ids.has(eventId)) {
        throw new LedgerProblem('BAD_REQUEST', 'an event_id appears twice in one submit', { field: `events[${index}].event_id` });
      }
      ids.add(eventId);
      // Validate the raw data (not the transformed instance), so what is stored is what was sent.
      const data = validatePlain(FACT_DATA_DTOS[event.type], raw.events[index].data, `events[${index}].data`);
      return { event_id: eventId, type: event.type, data: data as SubmitRequest['events'][number]['data'] };
    });
    return { ...(checked.expected_revision === undefined ? {} : { expected_revision: checked.expected_revision }), events };
  }
}
