import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

/** One registry per app instance, so tests that start several apps do not collide. */
export class HttpMetrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'aileron_http_requests_total',
    help: 'HTTP requests by route template, method and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
    // what the fast paths tallied since the last read goes in before anyone reads
    collect: () => this.flushTallies(),
  });
  private readonly duration = new Histogram({
    name: 'aileron_http_request_duration_seconds',
    help: 'HTTP request latency by route template and method',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'aileron_' });
  }

  private readonly counters = new Map<string, { inc(): void }>();
  private readonly tallies: Tally[] = [];
  private readonly timers = new Map<string, { observe(value: number): void }>();

  /** One answered request (RequestLog says when). */
  observe(method: string, route: string, status: number, seconds: number): void {
    this.count(method, route, status);
    const key = `${method} ${route}`;
    let timer = this.timers.get(key);
    if (!timer) this.timers.set(key, (timer = this.duration.labels(method, route)));
    timer.observe(seconds);
  }

  private count(method: string, route: string, status: number): void {
    const key = `${method} ${route} ${status}`;
    let counter = this.counters.get(key);
    if (!counter) this.counters.set(key, (counter = this.requests.labels(method, route, String(status))));
    counter.inc();
  }

  /**
   * A count of requests with one label set, for a fast path that answers
   * thousands a second: a plain number, handed to the counter whenever the
   * metrics are read, so a request does not pay for hashing its labels.
   */
  tally(method: string, route: string, status: number): Tally {
    const tally = new Tally({ method, route, status: String(status) });
    this.tallies.push(tally);
    return tally;
  }

  private flushTallies(): void {
    for (const tally of this.tallies) {
      if (tally.count === 0) continue;
      this.requests.inc(tally.labels, tally.count);
      tally.count = 0;
    }
  }
}

export class Tally {
  count = 0;

  constructor(readonly labels: Readonly<Record<'method' | 'route' | 'status', string>>) {}

  add(): void {
    this.count++;
  }
}
