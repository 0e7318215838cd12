/**
 * The PostgreSQL event store's notifications after COMMIT (src/adapters/postgres/postgres-event-store.adapter.ts):
 * at most one in flight, and a commit that lands while one is in flight is announced by one more,
 * started after the first has answered. Counted on a send the test settles by hand.
 */
import { Announcer } from '../../../src/adapters/postgres/postgres-event-store.adapter';

/** A send whose every call stays in flight until the test settles it. */
function heldSends() {
  const pending: Array<(failure?: Error) => void> = [];
  const send = () =>
    new Promise<void>((resolve, reject) => pending.push((failure) => (failure ? reject(failure) : resolve())));
  /** Settles the oldest send in flight and lets the announcer go on. */
  const settle = async (failure?: Error) => {
    pending.shift()?.(failure);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { send, settle, inFlight: () => pending.length };
}

describe('Announcer', () => {
  it('sends one notification for a commit when none is in flight', async () => {
    const sends = heldSends();
    const announcer = new Announcer(sends.send);
    announcer.announce();
    expect(sends.inFlight()).toBe(1);
    await sends.settle();
    expect(announcer.sent).toBe(1);
    expect(sends.inFlight()).toBe(0);
  });

  it('answers commits made while one is in flight with exactly one more, sent after it answered', async () => {
    const sends = heldSends();
    const announcer = new Announcer(sends.send);
    announcer.announce();
    // Three commits land while the first notification is in flight: none is sent beside it.
    announcer.announce();
    announcer.announce();
    announcer.announce();
    expect(announcer.sent).toBe(1);
    expect(sends.inFlight()).toBe(1);
    // Once it answered, one more covers all three (it starts after their commits).
    await sends.settle();
    expect(announcer.sent).toBe(2);
    expect(sends.inFlight()).toBe(1);
    await sends.settle();
    expect(announcer.sent).toBe(2);
    expect(sends.inFlight()).toBe(0);
    // And the next commit is announced again.
    announcer.announce();
    expect(announcer.sent).toBe(3);
  });

  it('goes on after a notification that failed (followers poll for what it would have said)', async () => {
    const sends = heldSends();
    const announcer = new Announcer(sends.send);
    announcer.announce();
    announcer.announce();
    await sends.settle(new Error('connection terminated'));
    expect(announcer.sent).toBe(2);
    await sends.settle();
    announcer.announce();
    expect(announcer.sent).toBe(3);
  });
});
