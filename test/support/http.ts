import { randomUUID } from 'node:crypto';

export interface HttpAnswer<T = any> {
  status: number;
  headers: Headers;
  body: T;
  contentType: string;
}

export async function request<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<HttpAnswer<T>> {
  const send = () =>
    fetch(`${baseUrl}${path}`, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  // A kept-alive socket the server closed while it sat idle in fetch's pool fails the next request
  // before it is sent ("other side closed"); a read is safe to send again on a new one.
  const response = await send().catch((error: { cause?: { code?: string } }) => {
    if (method === 'GET' && error.cause?.code === 'UND_ERR_SOCKET') return send();
    throw error;
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON: the raw text is the body */
  }
  return {
    status: response.status,
    headers: response.headers,
    body: parsed as T,
    contentType: response.headers.get('content-type') ?? '',
  };
}

export const opPath = (ref: string) => `/v1/operations/${encodeURIComponent(ref)}`;

export function fact(type: string, data: Record<string, unknown>, eventId: string = randomUUID()) {
  return { event_id: eventId, type, data };
}

/** Submits one fact to an operation and answers the ledger's answer as it came. */
export const submitFact = (
  baseUrl: string,
  ref: string,
  type: string,
  data: Record<string, unknown>,
  headers: Record<string, string> = {},
) => request(baseUrl, 'POST', `${opPath(ref)}/events`, { events: [fact(type, data)] }, headers);

/**
 * The position a submit committed at. A refusal (409) is part of many stories, as the ledger
 * records it: with `refusals: 'allowed'` it answers undefined; any other answer throws, naming the fact.
 */
export function committedPosition(
  answer: HttpAnswer,
  what: string,
  { refusals }: { refusals: 'allowed' | 'fail' } = { refusals: 'fail' },
): number | undefined {
  if (answer.status === 200) return answer.body.position as number;
  if (answer.status === 409 && refusals === 'allowed') return undefined;
  throw new Error(`${what}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

/** A small client for the tests: submit one fact, read state. */
export function ledgerAt(baseUrl: string, headers: Record<string, string> = {}) {
  return {
    submit: (ref: string, events: unknown[], expected_revision?: number) =>
      request(
        baseUrl,
        'POST',
        `${opPath(ref)}/events`,
        { events, ...(expected_revision === undefined ? {} : { expected_revision }) },
        headers,
      ),
    state: (ref: string) => request(baseUrl, 'GET', opPath(ref), undefined, headers),
    events: (ref: string, query = '') => request(baseUrl, 'GET', `${opPath(ref)}/events${query}`, undefined, headers),
  };
}
