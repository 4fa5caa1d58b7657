import { INSTANCE_DRIVER, type InstanceDriver } from '@aileron/pool';
import type { TestControlPlane } from '../support/control-plane';

/**
 * Holds the pool's instance starts until `release()`: an instance that
 * starts meanwhile is listed `starting` for as long as the test needs to see
 * it (a real start is over in a fraction of a second).
 */
export function holdInstanceStarts(cp: TestControlPlane): { release: () => void } {
  const driver = cp.cp.app.get<InstanceDriver>(INSTANCE_DRIVER);
  const start = driver.start.bind(driver);
  let open!: () => void;
  const held = new Promise<void>((resolve) => (open = resolve));
  driver.start = async (spec) => {
    await held;
    return start(spec);
  };
  return {
    release: () => {
      driver.start = start;
      open();
    },
  };
}
