import type { ProjectedEvent } from '@recovery-ledger/projections';

/** Each event delivered twice in a row, then the whole log again: what an at-least-once feed may do. */
export function redelivered<E extends ProjectedEvent>(events: readonly E[]): E[] {
  return [
    ...events.flatMap((event) => [event, structuredClone(event)]),
    ...events.map((event) => structuredClone(event)),
  ];
}
