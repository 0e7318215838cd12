import { Inject, Injectable, type PipeTransform } from '@nestjs/common';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { LedgerProblem } from '@recovery-ledger/core/errors/ledger-problem';
import type { SubmitRequest } from '@recovery-ledger/core/contract/ledger-api.types';
import { FACT_DATA_DTOS, SubmitEventsDto } from './dto/submit-events.dto';
import { compileSubmitBody } from './submit-body.validator';
import { ledgerValidationPipe, validatePlain } from './validation';

/** The keys Nest's ValidationPipe deletes from a body before validating it (its stripProtoKeys). */
function holdsStrippedKey(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (
    !Array.isArray(value) &&
    (Object.hasOwn(value, '__proto__') || Object.hasOwn(value, 'prototype') || Object.hasOwn(value, 'constructor'))
  )
    return true;
  return Object.values(value).some(holdsStrippedKey);
}

/**
 * class-transformer skips keys named like Object.prototype members (`toString`, `valueOf`, …), so
 * the whitelist never sees them: refuse them here, everywhere but in the free-form parts (the
 * envelope, checked field by field against its own list, and a verification's `result`). Answers
 * whether a free-form part holds a key the DTO path deletes (then only that path answers alike).
 */
function refuseInheritedNames(value: unknown, path: string): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (path.endsWith('.envelope') || path.endsWith('.result')) return holdsStrippedKey(value);
  let stripped = false;
  for (const [key, member] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
    if (!Array.isArray(value) && (key in Object.prototype || key === 'prototype')) {
      throw new LedgerProblem('BAD_REQUEST', `${at} should not exist`, { field: at });
    }
    if (refuseInheritedNames(member, at)) stripped = true;
  }
  return stripped;
}

/**
 * The submit body: its outer shape, then each event's data by its type, each error naming the field.
 * A body the compiled schema accepts skips the DTOs (reflection-driven, and the costliest part of a
 * small submit); any other goes through them, so every refusal keeps its message and field.
 */
@Injectable()
export class SubmitEventsPipe implements PipeTransform<unknown, Promise<SubmitRequest>> {
  private readonly outer = ledgerValidationPipe();
  private readonly compiled = compileSubmitBody();

  constructor(@Inject(CONFIG) private readonly config: LedgerConfig) {}

  async transform(body: unknown): Promise<SubmitRequest> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object', { field: 'body' });
    }
    const stripped = refuseInheritedNames(body, '');
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
    const valid = !stripped && this.compiled(body);
    const checked = valid
      ? (body as SubmitEventsDto)
      : ((await this.outer.transform(body, { type: 'body', metatype: SubmitEventsDto })) as SubmitEventsDto);
    if (checked.events.length > this.config.maxEventsPerSubmit) {
      throw new LedgerProblem('BAD_REQUEST', `at most ${this.config.maxEventsPerSubmit} events per submit`, {
        field: 'events',
      });
    }
    const raw = body as { events: Array<{ data: unknown }> };
    const ids = new Set<string>();
    const events = checked.events.map((event, index) => {
      // UUIDs compare case-insensitively; the ledger stores them lower-case.
      const eventId = event.event_id.toLowerCase();
      if (ids.has(eventId)) {
        throw new LedgerProblem('BAD_REQUEST', 'an event_id appears twice in one submit', {
          field: `events[${index}].event_id`,
        });
      }
      ids.add(eventId);
      // Validate the raw data (not the transformed instance), so what is stored is what was sent.
      const data = valid
        ? raw.events[index].data
        : validatePlain(FACT_DATA_DTOS[event.type], raw.events[index].data, `events[${index}].data`);
      return { event_id: eventId, type: event.type, data: data as SubmitRequest['events'][number]['data'] };
    });
    return {
      ...(checked.expected_revision === undefined ? {} : { expected_revision: checked.expected_revision }),
      events,
    };
  }
}
