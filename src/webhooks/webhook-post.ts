import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isPrivateHost, PrivateAddressError, publicOnlyLookup } from './webhook-address';

/** How much of a receiver's answer is read: enough for the delivery record, never the whole of it. */
export const ANSWER_PREFIX_BYTES = 4096;

export interface WebhookAnswer {
  status: number;
  /** The first ANSWER_PREFIX_BYTES of the answer's body at most, as text. */
  prefix: string;
}

export interface PostOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  /** Aborts the POST before its timeout (the service stopping). */
  signal?: AbortSignal;
}

/**
 * One POST of a delivery. The answer's body is read up to a small prefix and the connection is then
 * closed: a receiver (or whatever answers at its address) that sends a huge or endless body costs
 * the service 4 KiB, not the body (docs/webhooks.md). Redirects are not followed (a 3xx is an answer
 * that is not 2xx), and unless private addresses are allowed the host is refused when it is, or
 * resolves to, one (webhook-address.ts).
 */
export function postWebhook(
  target: string,
  body: string,
  headers: Record<string, string>,
  options: PostOptions,
): Promise<WebhookAnswer> {
  const url = new URL(target);
  if (!options.allowPrivate && isPrivateHost(url.hostname))
    return Promise.reject(new PrivateAddressError(url.hostname, url.hostname));
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<WebhookAnswer>((resolve, reject) => {
    let settled = false;
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      outgoing.destroy();
      reject(error);
    };
    const finish = (answer: IncomingMessage) => {
      if (settled) return;
      settled = true;
      // Closes the connection whatever is left of the answer: nothing more of it is read.
      answer.destroy();
      outgoing.destroy();
      resolve({
        status: answer.statusCode ?? 0,
        prefix: Buffer.concat(chunks).subarray(0, ANSWER_PREFIX_BYTES).toString('utf8'),
      });
    };
    const outgoing = request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent: false,
        signal: options.signal
          ? AbortSignal.any([AbortSignal.timeout(options.timeoutMs), options.signal])
          : AbortSignal.timeout(options.timeoutMs),
        ...(options.allowPrivate ? {} : { lookup: publicOnlyLookup }),
      },
      (answer) => {
        answer.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          size += chunk.length;
          if (size >= ANSWER_PREFIX_BYTES) finish(answer);
        });
        answer.once('end', () => finish(answer));
        answer.once('error', fail);
      },
    );
    outgoing.once('error', (error: Error) =>
      fail(error.name === 'AbortError' ? new Error(`no answer within ${options.timeoutMs} ms`) : error),
    );
    outgoing.end(body);
  });
}
