import { lookup as dnsLookup, promises as dns, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Checks for URLs the control plane calls out to (webhook targets, SIEM sinks,
 * upstream MCP servers), so a tenant cannot point them at our own network,
 * the cloud metadata service or the host itself.
 *
 * Deny by default: an address passes only if ipaddr.js calls it plain
 * `unicast` (and, for IPv6, it lies in the global unicast block 2000::/3).
 * Every other range (private, loopback, link-local, CGNAT, multicast, NAT64,
 * 6to4, Teredo, documentation, ...) is refused unless the policy allows it.
 */

export interface OutboundPolicy {
  /** operator-approved CIDRs (see parseCidrList) whose addresses are allowed whatever their range */
  allowCidrs: string[];
  /** allow 127.0.0.0/8 and ::1, for local development and tests */
  allowLoopback: boolean;
}

export type AddressVerdict = { ok: true } | { ok: false; reason: string };

export type HostLookup = (host: string) => Promise<string[]>;

export class OutboundUrlRefusedError extends Error {
  readonly code = 'OUTBOUND_URL_REFUSED';

  /** `host` is only the host name or address: a URL's path and query may hold secrets and never appear here. */
  constructor(
    readonly host: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`Outbound URL to ${host || '(no host)'} refused: ${reason}`, options);
    this.name = 'OutboundUrlRefusedError';
  }
}

/**
 * Parses a comma-separated list of CIDRs (e.g. an environment variable).
 * A bare address counts as a single-address block (/32 or /128).
 * IPv4 must be four-part decimal: ipaddr.js would read "10/8" as 0.0.0.10/8.
 */
export function parseCidrList(text: string | undefined): string[] {
  if (!text) return [];
  const cidrs: string[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (!entry) continue;
    const cidr = entry.includes('/') ? entry : `${entry}/${isIP(entry) === 6 ? 128 : 32}`;
    const valid = ipaddr.IPv4.isValidCIDRFourPartDecimal(cidr) || (cidr.includes(':') && ipaddr.IPv6.isValidCIDR(cidr));
    if (!valid)
      throw new Error(`Invalid CIDR "${entry}" in the outbound allow-list: expected e.g. 10.1.0.0/16 or fd00::/8`);
    cidrs.push(cidr);
  }
  return cidrs;
}

const RANGE_REASONS: Record<string, string> = {
  private: 'a private address',
  loopback: 'a loopback address',
  linkLocal: 'a link-local address',
  uniqueLocal: 'a unique-local address',
  carrierGradeNat: 'a carrier-grade NAT address',
  unspecified: 'an unspecified address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  reserved: 'a reserved address',
  benchmarking: 'a reserved address',
  rfc6052: 'a NAT64 address that embeds an IPv4 address',
  rfc6145: 'an IPv4-translated address',
  '6to4': 'a 6to4 address that embeds an IPv4 address',
  teredo: 'a Teredo address that embeds an IPv4 address',
};

// Everything outside it is unallocated or special (including the deprecated IPv4-compatible ::a.b.c.d).
const IPV6_GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');

/** The cloud metadata endpoint (AWS, GCP, Azure, ...): named in refusals because it is the usual SSRF prize. */
const METADATA_ADDRESS = '169.254.169.254';

/**
 * Whether a connection to this address is allowed. Exported on its own so a
 * socket-level check can apply it again to the address actually connected to
 * (DNS rebinding).
 */
export function isAddressAllowed(address: string, policy: OutboundPolicy): AddressVerdict {
  const bare = stripBrackets(address);
  if (!ipaddr.isValid(bare) || isIP(bare) === 0) return { ok: false, reason: 'not an IP address' };
  const raw = ipaddr.parse(bare);
  // ::ffff:10.0.0.1 reaches 10.0.0.1: judge the IPv4 address it carries
  const ip = ipaddr.process(bare);

  if (policy.allowCidrs.some((cidr) => inCidr(ip, cidr) || inCidr(raw, cidr))) return { ok: true };

  const range = ip.range();
  if (range === 'loopback' && policy.allowLoopback) return { ok: true };
  if (range !== 'unicast') {
    const reason = RANGE_REASONS[range] ?? `a special-purpose address (${range})`;
    return { ok: false, reason: ip.toString() === METADATA_ADDRESS ? `${reason} (cloud metadata)` : reason };
  }
  if (ip.kind() === 'ipv6' && !ip.match(IPV6_GLOBAL_UNICAST))
    return { ok: false, reason: 'not a global unicast address' };
  return { ok: true };
}

/**
 * Parses and checks an outbound URL; returns the parsed URL when every address
 * its host resolves to is allowed. Throws OutboundUrlRefusedError otherwise.
 *
 * This checks at configuration and send time; the resolver may answer
 * differently when the request connects, so the HTTP client should check the
 * connected address with isAddressAllowed as well.
 */
export async function checkOutboundUrl(
  url: string,
  policy: OutboundPolicy,
  lookup: HostLookup = systemLookup,
): Promise<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // the input is not echoed: it may carry a token
    throw new OutboundUrlRefusedError('', 'not a valid URL');
  }
  const host = stripBrackets(parsed.hostname);
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new OutboundUrlRefusedError(host, `scheme ${parsed.protocol} is not allowed (only http: and https:)`);
  }
  if (parsed.username || parsed.password) {
    throw new OutboundUrlRefusedError(host, 'credentials in the URL are not allowed');
  }
  if (!host) throw new OutboundUrlRefusedError(host, 'no host');

  if (isIP(host) !== 0) {
    const verdict = isAddressAllowed(host, policy);
    if (!verdict.ok) throw new OutboundUrlRefusedError(host, `is ${verdict.reason}`);
    return parsed;
  }

  let addresses: string[];
  try {
    addresses = await lookup(host);
  } catch (error) {
    throw new OutboundUrlRefusedError(host, 'does not resolve', { cause: error });
  }
  if (addresses.length === 0) throw new OutboundUrlRefusedError(host, 'does not resolve');
  // every address: the client may connect to any of them
  for (const address of addresses) {
    const verdict = isAddressAllowed(address, policy);
    if (!verdict.ok) throw new OutboundUrlRefusedError(host, `resolves to ${address}, ${verdict.reason}`);
  }
  return parsed;
}

async function systemLookup(host: string): Promise<string[]> {
  const results = await dns.lookup(host, { all: true, verbatim: true });
  return results.map((result) => result.address);
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function inCidr(ip: ipaddr.IPv4 | ipaddr.IPv6, cidr: string): boolean {
  const block = ipaddr.parseCIDR(cidr);
  return block[0].kind() === ip.kind() && ip.match(block);
}

/**
 * The installation's outbound policy, in one place for every caller (SIEM
 * sinks, webhooks, upstream MCP URLs): the operator's allow-list, and loopback
 * only in the embedded mode, where the control plane and its targets share one
 * developer's machine.
 */
export function outboundPolicyOf(config: {
  upstreamAllowCidrs: string[];
  mode: 'embedded' | 'server';
}): OutboundPolicy {
  return { allowCidrs: config.upstreamAllowCidrs, allowLoopback: config.mode === 'embedded' };
}

export class RefusedAddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RefusedAddressError';
  }
}

/**
 * The socket's resolver: every address a name resolves to must pass the same
 * SSRF rules as the URL check. Give it to every outbound connection (webhooks,
 * upstream MCP servers, SIEM sinks, OIDC and JWKS), not just the check when a
 * URL is saved, so a name that resolved to a public address cannot connect to
 * a private one a moment later (DNS rebinding).
 */
export function guardedLookup(host: string, policy: OutboundPolicy): LookupFunction {
  return ((
    hostname: string,
    lookupOptions: { all?: boolean; family?: number },
    callback: (...args: unknown[]) => void,
  ) => {
    dnsLookup(hostname, { ...lookupOptions, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error);
      for (const { address } of addresses) {
        const verdict = isAddressAllowed(address, policy);
        if (!verdict.ok)
          return callback(
            new RefusedAddressError(`Outbound URL to ${host} refused: resolves to ${address}, ${verdict.reason}`),
          );
      }
      if (addresses.length === 0) return callback(Object.assign(new Error('no address'), { code: 'ENOTFOUND' }));
      if (lookupOptions.all) return callback(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  }) as unknown as LookupFunction;
}
