import { operationStream } from '../../store/stream-names';
import { CliError } from '../cli-errors';
import { encodeRef, remoteLedger, withLocalStore, type GlobalOptions } from '../ledger-source';
import type { EventView, OperationEvents } from '@recovery-ledger/core';
import {
  buildTimeline,
  fromEventView,
  fromStored,
  isTerminal,
  type Timeline,
  type TimelineEvent,
} from '../operation-timeline';
import { formatDuration, renderTable, writeJson } from '../text-format';

export interface ReplayOptions {
  asOf?: number;
  json?: boolean;
}

type RemoteEvents = Pick<OperationEvents, 'events' | 'next_cursor'>;

/** The stream's events: from the store itself, or from the public API with the caller's key. */
export async function readOperationEvents(global: GlobalOptions, ref: string): Promise<TimelineEvent[]> {
  const remote = remoteLedger(global);
  if (remote) {
    // The API pages a stream's events (docs/contract.md §9): every page, in order.
    const events: EventView[] = [];
    for (let cursor: string | undefined = ''; cursor !== undefined;) {
      const query: string = cursor ? `?limit=500&cursor=${encodeURIComponent(cursor)}` : '?limit=500';
      const answer: RemoteEvents = await remote.get<RemoteEvents>(`/v1/operations/${encodeRef(ref)}/events${query}`);
      events.push(...answer.events);
      cursor = answer.next_cursor;
    }
    return events.map(fromEventView);
  }
  const events = await withLocalStore(global, ({ store }) => store.readStream(operationStream(global.tenant, ref)));
  if (events.length === 0) throw new CliError(`operation ${ref} has no events in tenant ${global.tenant}`);
  return events.map(fromStored);
}

function attempts(row: Timeline['rows'][number]): string {
  const { state } = row;
  return state.status === 'unplanned' ? '-' : `${state.attempts_used} used, ${state.attempts_remaining} left`;
}

export function renderTimeline(timeline: Timeline): string {
  const last = timeline.rows[timeline.rows.length - 1];
  const cut =
    timeline.as_of_revision === undefined ? '' : ` as of revision ${last?.revision ?? -1} of ${timeline.revision}`;
  let output = `${timeline.operation_ref}: ${timeline.rows.length} events${cut}, ${last ? `state ${last.state.status}` : 'no state'}\n\n`;
  output += renderTable(
    ['REV', 'RECORDED AT', 'EVENT', 'STATE AFTER', 'ATTEMPTS', 'WHY'],
    timeline.rows.map((row) => [
      String(row.revision),
      row.recorded_at,
      row.type,
      row.state.status,
      attempts(row),
      row.why,
    ]),
  );
  output += '\nTime in each state\n';
  output += renderTable(
    ['STATE', 'FROM', 'FOR'],
    timeline.time_in_state.map((span) => [
      span.status,
      span.from,
      span.ms !== undefined ? formatDuration(span.ms) : isTerminal(span.status) ? '(terminal)' : '(current)',
    ]),
  );
  return output;
}

export async function replayCommand(global: GlobalOptions, ref: string, options: ReplayOptions): Promise<void> {
  const events = await readOperationEvents(global, ref);
  const timeline = buildTimeline(ref, events, options.asOf);
  if (options.json) writeJson(process.stdout, timeline);
  else process.stdout.write(renderTimeline(timeline));
}
