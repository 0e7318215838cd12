/**
 * The one contract every time base adapter passes (src/store/time-base.port.ts): one base per
 * boot shared by every instance of that store, never starting before an earlier boot's,
 * and heartbeats every instance reads; then the instances' clocks over it (src/ledger/instance-
 * clocks.ts): agreeing on one boot, and comparing through heartbeats across boots (other hosts),
 * take-overs held while they disagree (docs/reliability.md, "Instances agree on time").
 */
import { randomUUID } from 'node:crypto';
import { InstanceClocks, type InstanceClocksOptions } from '../../src/ledger/instance-clocks';
import type { InstanceHeartbeat, TimeBase, TimeBaseStore } from '../../src/store/time-base.port';

export interface TimeBaseStoresUnderTest {
  /** Two instances over one store (two connections to one file, two clients of one server). */
  stores: [TimeBaseStore, TimeBaseStore];
  /** A further connection, for an InstanceClocks that closes its own on stop. */
  open(): TimeBaseStore;
  cleanup(): Promise<void>;
}

const T0 = 1_800_000_000_000;
const HOUR = 3_600_000;
const SETTINGS = { heartbeatMs: 2_000, skewBoundMs: 1_000 };

const base = (bootId: string, wallMs: number, monotonicMs = 50_000): TimeBase => ({
  boot_id: bootId,
  wall_ms: wallMs,
  monotonic_ms: monotonicMs,
  instance_id: randomUUID(),
});
const heartbeat = (instanceId: string, ledgerMs: number, seq = 1): InstanceHeartbeat => ({
  instance_id: instanceId,
  boot_id: 'boot-x',
  ledger_ms: ledgerMs,
  monotonic_ms: 1,
  seq,
});

export function testTimeBaseStore(name: string, factory: () => Promise<TimeBaseStoresUnderTest>): void {
  describe(`time base store contract: ${name}`, () => {
    let subject: TimeBaseStoresUnderTest;
    let a: TimeBaseStore;
    let b: TimeBaseStore;
    const started: InstanceClocks[] = [];

    beforeEach(async () => {
      subject = await factory();
      [a, b] = subject.stores;
    });
    afterEach(async () => {
      await Promise.all(started.splice(0).map((clocks) => clocks.stop()));
      await subject.cleanup();
    });

    it('the first instance of a boot writes the base; every other one of that boot adopts it', async () => {
      const boot = `boot-${randomUUID()}`;
      const written = await a.adoptBase(base(boot, T0, 1_000));
      expect(written).toMatchObject({ boot_id: boot, wall_ms: T0, monotonic_ms: 1_000 });
      // Started later, on a wall clock an hour ahead: it still takes the stored base.
      expect(await b.adoptBase(base(boot, T0 + HOUR, 9_000))).toEqual(written);
    });

    it('instances of one boot racing to write its base all answer the same one', async () => {
      const boot = `boot-${randomUUID()}`;
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, index) =>
          (index % 2 === 0 ? a : b).adoptBase(base(boot, T0 + index * 1_000, index)),
        ),
      );
      expect(new Set(answers.map((answer) => JSON.stringify(answer))).size).toBe(1);
    });

    it('a new boot starts no earlier than the base of an earlier boot; heartbeats do not raise it', async () => {
      await a.adoptBase(base(`boot-${randomUUID()}`, T0));
      // A host whose clock ran an hour ahead recorded that time; it must not be passed on.
      await a.beat(heartbeat(randomUUID(), T0 + 2 * HOUR));
      // After a reboot whose wall clock was lost (set far back): no earlier than the last base.
      expect((await b.adoptBase(base(`boot-${randomUUID()}`, T0 - 24 * HOUR))).wall_ms).toBe(T0);
      // One read from a sound clock keeps it.
      expect((await a.adoptBase(base(`boot-${randomUUID()}`, T0 + HOUR))).wall_ms).toBe(T0 + HOUR);
    });

    it('every instance reads every heartbeat, each its latest; one that leaves is gone', async () => {
      const [one, two]: string[] = [randomUUID(), randomUUID()];
      await a.beat(heartbeat(one, T0, 1));
      const seen = await b.beat(heartbeat(two, T0 + 10, 1));
      expect(
        seen.filter((beat) => [one, two].includes(beat.instance_id)).map((beat) => [beat.instance_id, beat.seq]),
      ).toEqual(
        [
          [one, 1],
          [two, 1],
        ].sort((x, y) => String(x[0]).localeCompare(String(y[0]))),
      );
      const again = await a.beat({ ...heartbeat(one, T0 + 2_000, 2), ahead: { instance_id: two, ms: 1_500 } });
      expect(again.find((beat) => beat.instance_id === one)).toMatchObject({
        seq: 2,
        ledger_ms: T0 + 2_000,
        ahead: { instance_id: two, ms: 1_500 },
      });
      expect(again.filter((beat) => beat.instance_id === one)).toHaveLength(1);
      await a.leave(one);
      const after = await b.beat(heartbeat(two, T0 + 2_010, 2));
      expect(after.map((beat) => beat.instance_id)).not.toContain(one);
      expect(after.map((beat) => beat.instance_id)).toContain(two);
    });

    it('a clock more than the retention ahead does not erase the others; a heartbeat older than it by two clocks is dropped', async () => {
      const [one, two, three]: string[] = [randomUUID(), randomUUID(), randomUUID()];
      await a.beat(heartbeat(one, T0, 1));
      // Two days ahead: by its clock the first is stale, but the first is the only other clock there is.
      const seen = await b.beat(heartbeat(two, T0 + 48 * HOUR, 1));
      expect(seen.map((beat) => beat.instance_id)).toEqual(expect.arrayContaining([one, two]));
      expect((await a.beat(heartbeat(one, T0 + 2_000, 2))).map((beat) => beat.instance_id)).toEqual(
        expect.arrayContaining([one, two]),
      );
      // A third clock agrees with the second: the first is now older than the retention by two of them.
      const later = await b.beat(heartbeat(three, T0 + 48 * HOUR + 10, 1));
      expect(later.map((beat) => beat.instance_id)).toEqual(expect.arrayContaining([two, three]));
      expect(later.map((beat) => beat.instance_id)).not.toContain(one);
    });

    describe('instance clocks over the store', () => {
      let monotonic: number;
      const start = async (options: InstanceClocksOptions) => {
        const clocks = await InstanceClocks.start(subject.open(), {
          settings: SETTINGS,
          timer: false,
          monotonicNow: () => monotonic,
          ...options,
        });
        started.push(clocks);
        return clocks;
      };
      /**
       * One heartbeat period passes and the instances beat once each, in this order. A heartbeat is
       * read as written `age` ago, so its lead shows less by that much: the order decides which
       * instance reads the other's fresh (the real ones beat at unrelated phases, so each does, in time).
       */
      const period = async (...instances: InstanceClocks[]) => {
        monotonic += SETTINGS.heartbeatMs;
        for (const clocks of instances) await clocks.beat();
      };

      beforeEach(() => {
        monotonic = 7_000_000;
      });

      it('two instances of one boot agree to the millisecond, whatever their wall clocks, and take over freely', async () => {
        const boot = `boot-${randomUUID()}`;
        const first = await start({ bootId: boot, wallNow: () => T0 + monotonic });
        monotonic += 60_000;
        // Started a minute later on a wall clock an hour ahead (a step, or a suspend, in between).
        const second = await start({ bootId: boot, wallNow: () => T0 + HOUR + monotonic });
        expect(second.clock.now().getTime()).toBe(first.clock.now().getTime());
        await period(first, second);
        await period(first, second);
        for (const clocks of [first, second]) {
          expect(clocks.status()).toMatchObject({
            time_base: 'shared',
            live_instances: 2,
            skew_ms: 0,
            take_overs: 'allowed',
          });
          expect(clocks.takeOversAllowed()).toBe(true);
        }
        // The second's wall clock disagrees with the shared base: seen as a step, and followed not.
        expect(second.clock.status()).toMatchObject({ steps_detected: 1, offset_ms: HOUR });
      });

      it('instances of two boots (two hosts) whose clocks differ beyond the bound both hold take-overs back, and say by how much', async () => {
        const behind = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + monotonic });
        const ahead = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + 5_000 + monotonic });
        // Until the other host has judged its clock, the newcomer hands over nothing.
        expect(ahead.status()).toMatchObject({ take_overs: 'held', reason: 'unjudged' });
        await period(ahead, behind);
        // The instance behind sees the other's fresh heartbeat ahead of its own time.
        expect(behind.status()).toMatchObject({ take_overs: 'held', reason: 'skew', skew_ms: 5_000 });
        await period(behind, ahead);
        // The one ahead learns it from the other's heartbeat.
        expect(ahead.status()).toMatchObject({ take_overs: 'held', reason: 'skew', skew_ms: 5_000, live_instances: 2 });
        expect(ahead.takeOversAllowed()).toBe(false);
      });

      it('a heartbeat read late shows a lead smaller by its age, never larger', async () => {
        const behind = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + monotonic });
        const ahead = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + 5_000 + monotonic });
        // Each reads the other's heartbeat of the period before: 2 s old.
        await period(behind, ahead);
        expect(behind.status().skew_ms).toBe(5_000 - SETTINGS.heartbeatMs);
      });

      it('instances of two boots within the bound hand over once each has judged the other; a stopped peer stops counting', async () => {
        const one = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + monotonic });
        const two = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + 400 + monotonic });
        expect(two.takeOversAllowed()).toBe(false);
        await period(two, one);
        await period(one, two);
        await period(two, one);
        for (const clocks of [one, two])
          expect(clocks.status()).toMatchObject({ take_overs: 'allowed', live_instances: 2 });
        expect(one.status().skew_ms).toBe(400);
        // A peer far ahead that stops beating (it crashed, its heartbeat left behind) holds take-overs only while it looks live.
        const crashed = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + HOUR + monotonic });
        await period(one, two);
        expect(one.status()).toMatchObject({ take_overs: 'held', reason: 'skew' });
        for (let i = 0; i < 4; i++) await period(two, one);
        expect(one.status()).toMatchObject({ take_overs: 'allowed', live_instances: 2 });
        expect(two.status()).toMatchObject({ take_overs: 'allowed', live_instances: 2 });
        expect(crashed.status().live_instances).toBeGreaterThanOrEqual(1);
      });

      // Windows another instance may have started (docs/reliability.md, "Windows across instances").
      it("a window is judged with a margin no smaller than this clock's lead over a live peer on another base; on one base with none", async () => {
        const boot = `boot-${randomUUID()}`;
        const first = await start({ bootId: boot, wallNow: () => T0 + monotonic });
        const second = await start({ bootId: boot, wallNow: () => T0 + HOUR + monotonic });
        await period(first, second);
        // One base and one monotonic clock: no margin, though the first read the second's heartbeat a period old.
        expect(await first.windowClock(false)).toEqual({ margin_ms: 0 });
        expect(await second.windowClock(false)).toEqual({ margin_ms: 0 });

        const behind = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + monotonic });
        const ahead = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + 400 + monotonic });
        for (let i = 0; i < 3; i++) await period(ahead, behind, first, second);
        expect(ahead.status()).toMatchObject({ take_overs: 'allowed' });
        // Read as soon as written (here the monotonic clock stands still): the lead itself.
        expect(await ahead.windowClock(true)).toEqual({ margin_ms: 400 });
        expect(await behind.windowClock(true)).toEqual({ margin_ms: 0 });
      });

      it('beyond the bound, or with a peer not yet compared, windows are not judged; a fresh read finds a peer started since the last beat', async () => {
        const behind = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + monotonic });
        const ahead = await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 + 5_000 + monotonic });
        expect(await ahead.windowClock(false)).toEqual({ unbounded: 'unjudged' });
        for (let i = 0; i < 3; i++) await period(ahead, behind);
        for (const clocks of [ahead, behind]) expect(await clocks.windowClock(true)).toEqual({ unbounded: 'skew' });
        await ahead.stop();
        started.splice(started.indexOf(ahead), 1);
        for (let i = 0; i < 4; i++) await period(behind);
        expect(await behind.windowClock(true)).toEqual({ margin_ms: 0 });

        // Another host's instance, an hour behind, starts (and may grant an attempt) before this one beats again.
        await start({ bootId: `boot-${randomUUID()}`, wallNow: () => T0 - HOUR + monotonic });
        expect(await behind.windowClock(false)).toEqual({ margin_ms: 0 });
        expect(await behind.windowClock(true)).toEqual({ unbounded: 'unjudged' });
      });
    });
  });
}
