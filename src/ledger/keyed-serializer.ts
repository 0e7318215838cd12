/**
 * Runs tasks for the same key one after another, tasks for different keys concurrently. Within one
 * process, decisions on one operation queue here instead of racing to a revision conflict; across
 * processes the expected-revision append still decides (docs/contract.md §4.8).
 */
export class KeyedSerializer {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
