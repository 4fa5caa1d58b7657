import { describe, expect, it } from 'vitest';
import { EGRESS_EXCEPT_V4, EGRESS_EXCEPT_V6 } from '@aileron/net';
import { egressRules } from './local-egress';

describe('egressRules', () => {
  const rules = egressRules({
    allowCidrs: ['10.20.0.0/16', 'fd00:1::/64'],
    hostAddresses: ['10.20.0.5', '2001:db8::5'],
    resolvers: ['10.20.0.2'],
  });
  /** the kernel reads the rules by preference, lowest first, whatever order they were added in */
  const pref = (family: 'v4' | 'v6', rule: string) => {
    const line = rules[family].find((candidate) => candidate.endsWith(rule));
    expect(line, rule).toBeDefined();
    return Number(/^rule add pref (\d+) /.exec(line!)![1]);
  };

  it("refuses every range the pool's pods may not reach, per family", () => {
    for (const cidr of EGRESS_EXCEPT_V4) expect(rules.v4).toContain(`rule add pref 130 to ${cidr} prohibit`);
    for (const cidr of EGRESS_EXCEPT_V6) expect(rules.v6).toContain(`rule add pref 130 to ${cidr} prohibit`);
    expect(rules.v4.some((line) => line.includes(':'))).toBe(false);
  });

  it("opens only port 53 of the resolvers, and an allowed range never reopens the host's own addresses", () => {
    expect(rules.v4.filter((line) => line.includes('10.20.0.2/32'))).toEqual([
      'rule add pref 100 to 10.20.0.2/32 ipproto udp dport 53 lookup main',
      'rule add pref 100 to 10.20.0.2/32 ipproto tcp dport 53 lookup main',
    ]);
    expect(pref('v4', 'to 10.20.0.2/32 ipproto udp dport 53 lookup main')).toBeLessThan(
      pref('v4', 'to 10.20.0.5/32 prohibit'),
    );
    expect(pref('v4', 'to 10.20.0.5/32 prohibit')).toBeLessThan(pref('v4', 'to 10.20.0.0/16 lookup main'));
    expect(pref('v4', 'to 10.20.0.0/16 lookup main')).toBeLessThan(pref('v4', 'to 10.0.0.0/8 prohibit'));
    expect(pref('v6', 'to 2001:db8::5/128 prohibit')).toBeLessThan(pref('v6', 'to fd00:1::/64 lookup main'));
    expect(pref('v6', 'to fd00:1::/64 lookup main')).toBeLessThan(pref('v6', 'to fc00::/7 prohibit'));
  });
});
