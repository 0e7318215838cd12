/**
 * The shapes of the service's paths, each with what the log writes for it. A path carries what a
 * client chose (an operation_ref, a run id) and the query string may carry anything (a key sent
 * as `?api_key=`): the log writes the route's pattern, never the path or the query, and a path
 * that matches no route as `<unmatched>`. The request id and the trace id find the request.
 */
const ROUTE_SHAPES: ReadonlyArray<[RegExp, string]> = [
  [/^\/v1\/operations\/[^/]+\/events\/?$/, '/v1/operations/:ref/events'],
  [/^\/v1\/operations\/[^/]+\/evidence\/?$/, '/v1/operations/:ref/evidence'],
  [/^\/v1\/operations\/[^/]+\/?$/, '/v1/operations/:ref'],
  [/^\/v1\/runs\/[^/]+\/?$/, '/v1/runs/:run_id'],
  [/^\/ui\/[^/]+$/, '/ui/:file'],
  [/^\/docs\/.+$/, '/docs/:asset'],
  [
    /^\/(?:v1\/(?:operations|recovery|metrics\/trust|schema\/envelope|admin\/export|admin\/projections\/rebuild)|metrics|health\/(?:live|ready)|ui|docs|docs\/openapi\.json)?\/?$/,
    '',
  ],
];

export function loggedPath(url: string | undefined): string {
  const path = (url ?? '').split('?')[0];
  for (const [shape, pattern] of ROUTE_SHAPES) if (shape.test(path)) return pattern || path;
  return '<unmatched>';
}
