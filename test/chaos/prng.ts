/**
 * The campaign's only source of randomness: mulberry32, seeded, so a run is replayed by its seed
 * (CHAOS_SEED). Kill moments still land on different instructions from run to run, because the
 * service's own timing is not seeded; the seed fixes the schedule and the load's choices.
 */
export interface Random {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max]. */
  int(min: number, max: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** Picks a key with probability proportional to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K;
  /** An independent stream for a sub-task (a client, a worker), so adding one does not shift the others. */
  fork(label: number): Random;
}

export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const random: Random = {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)],
    weighted: (weights) => {
      const entries = Object.entries(weights) as Array<[never, number]>;
      const total = entries.reduce((sum, [, weight]) => sum + weight, 0);
      let roll = next() * total;
      for (const [key, weight] of entries) {
        roll -= weight;
        if (roll < 0) return key;
      }
      return entries[entries.length - 1][0];
    },
    fork: (label) => seededRandom((Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(label + 1, 0xc2b2ae35)) >>> 0),
  };
  return random;
}

/** A fresh seed when none is given; printed by the campaign so the run can be replayed. */
export function newSeed(): number {
  return Math.floor(Math.random() * 0x7fffffff) + 1;
}
