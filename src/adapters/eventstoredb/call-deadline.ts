/**
 * The client leaves several calls without a deadline: reads and subscriptions are opened with
 * `deadline: Infinity`, and BatchAppend sends its deadline to the server inside the request, so a
 * server that stops answering leaves the promise pending forever. Every call the adapter makes
 * goes through here instead.
 */
export class CallTimeoutError extends Error {
  constructor(
    readonly operation: string,
    readonly timeoutMs: number,
  ) {
    super(`${operation} got no answer within ${timeoutMs} ms`);
    this.name = 'CallTimeoutError';
  }
}

export function withDeadline<T>(
  work: Promise<T>,
  timeoutMs: number,
  operation: string,
  onTimeout?: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout?.();
      reject(new CallTimeoutError(operation, timeoutMs));
    }, timeoutMs);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
