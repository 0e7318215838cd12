/**
 * LangGraph's MemorySaver, written to a file after every write and read back at start: the smallest
 * durable checkpointer, so an agent process killed with SIGKILL resumes with LangGraph's own resume
 * (invoke with the same thread_id). Production uses a database saver; the resume path is the same.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { MemorySaver } from '@langchain/langgraph';

const BYTES = '__bytes_base64';

function replacer(_key: string, value: unknown): unknown {
  return value instanceof Uint8Array ? { [BYTES]: Buffer.from(value).toString('base64') } : value;
}

function reviver(_key: string, value: unknown): unknown {
  if (typeof value === 'object' && value !== null && BYTES in value)
    return new Uint8Array(Buffer.from((value as Record<string, string>)[BYTES], 'base64'));
  return value;
}

export class FileSaver extends MemorySaver {
  constructor(private readonly file: string) {
    super();
    if (existsSync(file)) {
      const saved = JSON.parse(readFileSync(file, 'utf8'), reviver) as Pick<MemorySaver, 'storage' | 'writes'>;
      this.storage = saved.storage;
      this.writes = saved.writes;
    }
  }

  private save(): void {
    // Whole or not at all: a kill between the two calls leaves the previous file.
    writeFileSync(`${this.file}.tmp`, JSON.stringify({ storage: this.storage, writes: this.writes }, replacer));
    renameSync(`${this.file}.tmp`, this.file);
  }

  override async put(...args: Parameters<MemorySaver['put']>): ReturnType<MemorySaver['put']> {
    const saved = await super.put(...args);
    this.save();
    return saved;
  }

  override async putWrites(...args: Parameters<MemorySaver['putWrites']>): ReturnType<MemorySaver['putWrites']> {
    await super.putWrites(...args);
    this.save();
  }
}
