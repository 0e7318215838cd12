/** Imported first by main.ts: starts tracing before any framework module is loaded (see tracing.ts). */
import { startTracing } from './tracing';

startTracing();
