import { pageOf } from '../page-cursor';
import type { Condition, QueryScope, ReadModelReader, ReadPosition } from '../read-model';
import { trustReport, type TrustMetricsDoc, type TrustReport } from './trust-metrics.projection';

export interface TrustQuery extends ReadPosition {
  tool?: string;
  limit: number;
  afterTool?: string;
}

export interface TrustAnswer {
  overall: TrustReport & { tools: number };
  tools: Array<TrustReport & { tool: string }>;
  next_cursor?: string;
  as_of_position: number;
}

/** The tenant's trust figures per tool, and over all its tools (docs/contract.md §5). */
export function trustOf({ readModel, tenant, asOf }: QueryScope, query: TrustQuery): TrustAnswer {
  const { tool, limit, afterTool } = query;
  const docs = trustDocs(readModel, tenant);
  const listed = docs
    .filter((doc) => (tool === undefined || doc.tool === tool) && (afterTool === undefined || doc.tool > afterTool))
    .sort((a, b) => (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0));
  const { page, next } = pageOf(listed, limit, (last) => [last.tool]);
  return {
    // Overall is over every tool of the tenant, whatever page or filter is asked.
    overall: { ...trustReport(docs), tools: docs.length },
    tools: page.map((doc) => ({ tool: doc.tool, ...trustReport([doc]) })),
    ...next,
    as_of_position: asOf,
  };
}

/** Every tool's trust document, of one tenant or of all (the Prometheus collector's view). */
export function trustDocs(readModel: ReadModelReader, tenant?: string): TrustMetricsDoc[] {
  const where: Condition[] = tenant === undefined ? [] : [{ column: 'tenant', op: '=', value: tenant }];
  return readModel
    .select<TrustMetricsDoc>('trust_metrics', { where, orderBy: [{ column: 'key' }] })
    .map((row) => row.doc);
}
