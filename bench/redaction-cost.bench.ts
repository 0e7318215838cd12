/**
 * What redaction costs per fact, on the path a submit takes: the secret scanner over the submit's
 * strings (secretlint's recommended preset, one lint per submit) and the domain's redaction of the
 * fact (shapes, key names, cards). Facts are envelopes with an unknown outcome and a verification
 * result, each with distinct messages (so the scanner's cache never answers), then the same facts
 * again (so it always does). Each figure is the median of 5 rounds of `count` facts.
 *
 *   npm run build && node dist/bench/redaction-cost.bench.js [count=2000]
 */
import { performance } from 'node:perf_hooks';
import { redactDeep, redactText, type SecretDetector, validateEnvelope } from '@recovery-ledger/core';
import { SecretScanner, stringsOf } from '../src/ledger/secret-scanner';

const count = Number(process.argv[2] ?? 2000);

/** `linted`: each fact also carries a unique token-like string (a 40-hex request id), so each scan runs secretlint. */
function facts(round: number, linted: boolean): Array<Record<string, unknown>> {
  return Array.from({ length: count }, (_, index) => {
    const ref = `run_${round}/step_${index}`;
    return {
      envelope: {
        ok: false,
        code: 'OUTCOME_UNKNOWN',
        category: 'dependency',
        commit_state: 'unknown',
        retry: { directive: 'never', max_attempts_remaining: 0 },
        next_action: 'verify_operation',
        operation_ref: ref,
        safe_details: { verification_tool: 'get_invoice_by_operation_ref' },
        agent_message: `The write may have completed (request ${round}-${index}). Verify operation_ref before any new write.`,
        user_message: `Checking invoice ${index} before anything is sent again.`,
      },
      result: {
        invoice_id: `inv_${round}_${index}`,
        amount: 1250 + index,
        customer: { name: 'Ada', email: `ada${index}@example.com` },
        ...(linted ? { request_id: `${round}${index}`.padStart(8, '0').repeat(5) } : {}),
      },
    };
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function measure(linted: boolean): Promise<void> {
  const scanner = new SecretScanner();
  await scanner.warmUp();
  const scanFresh: number[] = [];
  const scanCached: number[] = [];
  const domain: number[] = [];
  const domainWithout: number[] = [];
  for (let round = 0; round < 5; round++) {
    const batch = facts(round, linted);
    // One submit per fact, as a runtime sends them: one scan each.
    let t = performance.now();
    const detectors: SecretDetector[] = [];
    for (const fact of batch) detectors.push(await scanner.detectorFor(stringsOf(fact)));
    scanFresh.push(((performance.now() - t) * 1000) / count);
    t = performance.now();
    for (const fact of batch) await scanner.detectorFor(stringsOf(fact));
    scanCached.push(((performance.now() - t) * 1000) / count);
    t = performance.now();
    batch.forEach((fact, index) => {
      validateEnvelope(fact.envelope, {
        operationRef: `run_${round}/step_${index}`,
        sideEffect: 'write',
        detect: detectors[index],
      });
      redactDeep({ result: fact.result }, '', { detect: detectors[index] });
    });
    domain.push(((performance.now() - t) * 1000) / count);
    // The same without redaction at all, to separate it from validation.
    t = performance.now();
    batch.forEach((fact, index) =>
      validateEnvelope(fact.envelope, { operationRef: `run_${round}/step_${index}`, sideEffect: 'write' }),
    );
    domainWithout.push(((performance.now() - t) * 1000) / count);
  }
  void redactText;
  console.log(
    linted
      ? `facts with a unique token-like string (each scan lints):`
      : `facts whose strings need no lint (plain messages, names, numbers):`,
  );
  console.log(`  secret scan, new strings (secretlint, one lint per submit): ${median(scanFresh).toFixed(0)} µs`);
  console.log(`  secret scan, strings seen before (cache):                 ${median(scanCached).toFixed(0)} µs`);
  console.log(`  envelope check + redaction of envelope and result:         ${median(domain).toFixed(0)} µs`);
  console.log(`  envelope check with its own redaction, no detector:        ${median(domainWithout).toFixed(0)} µs`);
}

async function main(): Promise<void> {
  console.log(`per fact, median of 5 rounds of ${count}`);
  await measure(false);
  await measure(true);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
