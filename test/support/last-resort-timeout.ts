// The int and e2e tiers wait on readiness (a start on the service's "listening" line or its exit,
// a condition by polling it), never on a guessed duration: this bound only turns a test that
// never gets there into a failure, on a machine so loaded that a 10 000-request fuzz takes minutes.
jest.setTimeout(300_000);
