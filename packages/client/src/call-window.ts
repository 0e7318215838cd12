/**
 * The attempt's call window as the tool's HTTP call sees it (docs/reliability.md "How close the
 * check sits to the write"): the ledger's call deadline, sent to the provider, and the SDK's own
 * check, made again right before the request's bytes go to the socket.
 */

/** The header that carries the attempt's call deadline to the provider (RFC 3339, the ledger's clock). */
export const CALL_DEADLINE_HEADER = 'Ledger-Call-Deadline';

export interface CallWindow {
  /** The ledger's call deadline for the attempt, when it answered one: the last instant it may reach the provider. */
  deadline?: string;
  /** Whether the call may still start: false once the window minus its margin has passed (a monotonic clock). */
  open(): boolean;
}

const windows = new WeakMap<AbortSignal, CallWindow>();

/** Ties a window to the signal the SDK hands the tool, so an HTTP call given only that signal finds it. */
export function bindCallWindow(signal: AbortSignal, window: CallWindow): void {
  windows.set(signal, window);
}

/** The window bound to `signal`, if the SDK made it for an attempt. */
export function boundCallWindow(signal: AbortSignal | undefined): CallWindow | undefined {
  return signal === undefined ? undefined : windows.get(signal);
}
