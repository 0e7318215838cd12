// A process's start is waited on (its "listening" line or its exit), never guessed: this longer
// timeout is only the last resort on a machine so loaded that nothing moves.
jest.setTimeout(180_000);
