import { evolveStepState, type StepStateDoc } from '@recovery-ledger/projections';
import {
  compareTriage,
  DEFAULT_TRIAGE_THRESHOLDS,
  ON_REQUEST_KINDS,
  TRIAGE_KINDS,
  triageItemOf,
  type TriageItem,
  type TriageKind,
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
  next_cursor?: string;
  as_of: string;
}

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
  return { items, as_of: first.as_of };
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
  const items = docs
    .map((doc) => triageItemOf(doc, now.getTime(), DEFAULT_TRIAGE_THRESHOLDS))
    .filter((item): item is TriageItem => item !== undefined)
    .filter((item) => (options.kind === undefined ? !ON_REQUEST_KINDS.includes(item.kind) : item.kind === options.kind))
    .filter((item) => options.tool === undefined || item.tool === options.tool)
    .filter((item) => options.runId === undefined || item.run_id === options.runId)
    .sort(compareTriage);
  return { items, as_of: now.toISOString() };
}

export function renderTriage(page: TriagePage): string {
  if (page.items.length === 0) return `nothing needs a person (as of ${page.as_of})\n`;
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

export async function triageCommand(global: GlobalOptions, options: TriageOptions): Promise<void> {
  if (options.kind !== undefined && !TRIAGE_KINDS.includes(options.kind as TriageKind))
    throw usageError(`--kind must be one of ${TRIAGE_KINDS.join(', ')}, got "${options.kind}"`);
  const page = global.url ? await remoteTriage(global, options) : await localTriage(global, options);
  if (options.json) writeJson(process.stdout, page);
  else process.stdout.write(renderTriage(page));
}
