/** The ledger's clock. Decisions get `now` from here, never from the client (SPEC §4). */
export interface Clock {
  now(): Date;
}

export const CLOCK = Symbol('CLOCK');

export const systemClock: Clock = { now: () => new Date() };
