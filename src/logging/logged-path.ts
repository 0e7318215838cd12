import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';

/**
 * A path carries what a client chose (an operation_ref, a run id) and the query string may carry
 * anything (a key sent as `?api_key=`): the log writes the route's pattern, never the path or the
 * query, and a path that matches no route as `<unmatched>`. The request id and the trace id find
 * the request.
 *
 * The pattern is the one Fastify matched, put on the raw request before the request logger (a
 * middleware, which sees only the raw request) reads it, so a new route is logged by its pattern
 * without being listed anywhere. The shapes below remain for a request that never reached routing.
 */
const ROUTE_PATTERN = Symbol('ledger.routePattern');
type TaggedRequest = IncomingMessage & { [ROUTE_PATTERN]?: string };

/** Registers the hook that tags each raw request with its route's pattern; before any middleware. */
export function tagRoutePatterns(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request, _reply, done) => {
    const pattern = request.routeOptions?.url;
    if (pattern !== undefined) (request.raw as TaggedRequest)[ROUTE_PATTERN] = pattern;
    done();
  });
}

/** What the log writes for a raw request: its route's pattern, else the shape of its path. */
export function loggedRoute(raw: IncomingMessage | undefined, url: string | undefined): string {
  return (raw as TaggedRequest | undefined)?.[ROUTE_PATTERN] ?? loggedPath(url);
}

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
