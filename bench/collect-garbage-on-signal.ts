/**
 * Preloaded into the control planes a bench starts (NODE_OPTIONS=--expose-gc --require …), never into a product
 * process: on SIGURG the process collects all its garbage at once and says so on stderr. A bench reads what a
 * process retains (its caches, its sessions) from its resident memory after such a collection: before it, the
 * figure also holds whatever garbage V8 had not yet needed to collect, which depends on the heap's headroom and
 * the moment, not on what the process keeps.
 */
export const COLLECTED = 'aileron-bench: garbage collected';

const collect = (globalThis as { gc?: () => void }).gc;
if (collect)
  process.on('SIGURG', () => {
    collect();
    process.stderr.write(`${COLLECTED}\n`);
  });
