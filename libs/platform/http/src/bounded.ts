/**
 * The check's answer, or false once `ms` have passed or it failed: a probe
 * must answer in time whatever a dependency does (a stopped server answers at
 * once, a lost one never does). The check itself is not cancelled; it ends
 * on its own time, and its late answer is dropped.
 */
export function bounded(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    check().then(
      (ok) => {
        clearTimeout(timer);
        resolve(ok);
      },
      () => {
        clearTimeout(timer);
        resolve(false);
      },
    );
  });
}
