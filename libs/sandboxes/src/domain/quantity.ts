const QUANTITY_UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity of bytes (`10Gi`, `500M`, `1048576`) as a number; a malformed one is no bound. */
export function quantityBytes(quantity: string): number {
  const parsed = /^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/.exec(quantity);
  return parsed ? Math.floor(Number(parsed[1]) * QUANTITY_UNITS[parsed[2] ?? '']!) : Number.MAX_SAFE_INTEGER;
}
