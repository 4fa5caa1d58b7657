import { generateKeyPairSync, KeyPairKeyObjectResult } from 'node:crypto';
import { expect } from 'vitest';

const made: KeyPairKeyObjectResult[] = [];
let file: string | undefined;
let next = 0;

/**
 * An RSA key pair for a test's identity provider, one no other key of the same
 * test file is: a file that wants a second key (another provider, a stranger
 * who signs) gets another. Making one holds the worker's thread for ~0.2 s of
 * CPU, some sixty times a run, so the keys are kept and the next file in the
 * same worker takes them again: no file sees another's provider, each has
 * its own address, and a key is all they share.
 */
export function rsaKeyPair(): KeyPairKeyObjectResult {
  const current = expect.getState().testPath;
  if (current !== file) {
    file = current;
    next = 0;
  }
  if (next === made.length) made.push(generateKeyPairSync('rsa', { modulusLength: 2048 }));
  return made[next++]!;
}
