import { evolveStepState, type StepStateDoc } from '@recovery-ledger/projections';
import {
  compareTriage,
  DEFAULT_TRIAGE_THRESHOLDS,
  ON_REQUEST_KINDS,
  TRIAGE_KINDS,
  triageItemOf,
  waitingItemOf,
  type TriageItem,
  type TriageKind,
  type TriageWaitingItem,
} from '@recovery-ledger/projections';
import { operationStream } from '../../store/stream-names';
import { usageError } from '../cli-errors';
import { remoteLedger, withLocalStore, type GlobalOptions } from '../ledger-source';
import { formatDuration, renderTable, writeJson } from '../text-format';

export interface TriageOptions {
  kind?: string;
  tool?: string;
  runId?: string;
  json?: boolean;
}

interface TriagePage {
  items: TriageItem[];
  /** Unknown outcomes a lookup may still settle before they need a person (docs/contract.md §5). */
  waiting: TriageWaitingItem[];
  next_cursor?: string;
  as_of: string;
}

/** As many waiting unknown outcomes as the service's queue lists (WAITING_LIMIT in the projections). */
const WAITING_SHOWN = 20;

const PAGE = 500;

/**
 * Against a service, the queue is `GET /v1/triage`, every page: the service also drops the retries a
 * worker's lease holds. On a data directory it is the step-state projection's own fold over the
 * tenant's streams, judged now with the default thresholds (docs/contract.md §5); leases are not in
 * the log, so a held retry may show as retry_overdue there.
 */
async function remoteTriage(global: GlobalOptions, options: TriageOptions): Promise<TriagePage> {
  const remote = remoteLedger(global);
  if (!remote) throw new Error('remote triage needs --url');
  const query = { kind: options.kind, tool: options.tool, run_id: options.runId, limit: PAGE };
  const first = await remote.get<TriagePage>('/v1/triage', query);
  const items = [...first.items];
  for (let cursor = first.next_cursor; cursor;) {
    const page = await remote.get<TriagePage>('/v1/triage', { ...query, cursor });
    items.push(...page.items);
    cursor = page.next_cursor;
  }
  return { items, waiting: first.waiting ?? [], as_of: first.as_of };
}

async function localTriage(global: GlobalOptions, options: TriageOptions): Promise<TriagePage> {
  const now = new Date();
  const docs = await withLocalStore(global, async ({ store }) => {
    const byStream = new Map<string, StepStateDoc>();
    const streamPrefix = operationStream(global.tenant, '');
    for (let after = 0; ;) {
      const events = await store.readAll({ after, limit: PAGE, streamPrefix });
      for (const event of events) byStream.set(event.stream, evolveStepState(byStream.get(event.stream), event));
      if (events.length < PAGE) break;
      after = events[events.length - 1].position;
    }
    return [...byStream.values()];
  });
  const narrowed = docs
    .filter((doc) => options.tool === undefined || doc.tool === options.tool)
    .filter((doc) => options.runId === undefined || doc.run_id === options.runId);
  const items = narrowed
    .map((doc) => triageItemOf(doc, now.getTime(), DEFAULT_TRIAGE_THRESHOLDS))
    .filter((item): item is TriageItem => item !== undefined)
    .filter((item) => (options.kind === undefined ? !ON_REQUEST_KINDS.includes(item.kind) : item.kind === options.kind))
    .sort(compareTriage);
  const waiting =
    options.kind === undefined || options.kind === 'unknown_outcome'
      ? narrowed
          .map((doc) => waitingItemOf(doc, now.getTime(), DEFAULT_TRIAGE_THRESHOLDS))
          .filter((item): item is TriageWaitingItem => item !== undefined)
          .sort((a, b) => Date.parse(a.due_at) - Date.parse(b.due_at))
          .slice(0, WAITING_SHOWN)
      : [];
  return { items, waiting, as_of: now.toISOString() };
}

/**
 * The queue, then the unknown outcomes still waiting for a lookup: an empty queue with one of those
 * does not read as "nothing needs a person".
 */
export function renderTriage(page: TriagePage): string {
  return `${renderQueue(page)}${renderWaiting(page)}`;
}

function renderQueue(page: TriagePage): string {
  if (page.items.length === 0)
    return page.waiting.length === 0
      ? `nothing needs a person (as of ${page.as_of})\n`
      : `nothing needs a person yet (as of ${page.as_of})\n`;
  const table = renderTable(
    ['KIND', 'OPERATION', 'TOOL', 'STATUS', 'REASON', 'FOR', 'ASSIGNEE'],
    page.items.map((item) => [
      item.kind,
      item.operation_ref,
      item.tool,
      item.status,
      item.reason,
      formatDuration(item.age_ms),
      item.acknowledged?.assignee ?? '',
    ]),
  );
  return `${table}${page.items.length} need${page.items.length === 1 ? 's' : ''} a person (as of ${page.as_of})\n`;
}

function renderWaiting(page: TriagePage): string {
  if (page.waiting.length === 0) return '';
  const asOf = Date.parse(page.as_of);
  const table = renderTable(
    ['WAITING', 'OPERATION', 'TOOL', 'REASON', 'NEEDS A PERSON AT', 'IN'],
    page.waiting.map((item) => [
      'unknown_outcome',
      item.operation_ref,
      item.tool,
      item.reason,
      item.due_at,
      formatDuration(Math.max(0, Date.parse(item.due_at) - asOf)),
    ]),
  );
  const count = page.waiting.length;
  return `\n${table}${count} unknown outcome${count === 1 ? '' : 's'} waiting for a lookup: each needs a person at the time shown unless a lookup settles it first\n`;
}

export async function triageCommand(global: GlobalOptions, options: TriageOptions): Promise<void> {
  if (options.kind !== undefined && !TRIAGE_KINDS.includes(options.kind as TriageKind))
    throw usageError(`--kind must be one of ${TRIAGE_KINDS.join(', ')}, got "${options.kind}"`);
  const page = global.url ? await remoteTriage(global, options) : await localTriage(global, options);
  if (options.json) writeJson(process.stdout, page);
  else process.stdout.write(renderTriage(page));
}
