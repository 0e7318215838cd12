import { Logger } from '@nestjs/common';

/** For a log written before anchors: say so loudly (the module files each stream as an append would have). */
export function adoptionHooks() {
  const logger = new Logger('Integrity');
  return {
    onLogAdopted: (events: number) =>
      logger.warn(
        { events },
        'this log was written before anchors were kept: it is anchored as it stands now, and its past is trusted from here on',
      ),
  };
}
