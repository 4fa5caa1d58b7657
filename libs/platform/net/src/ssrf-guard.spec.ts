import { describe, expect, it } from 'vitest';
import {
  checkOutboundUrl,
  isAddressAllowed,
  OutboundPolicy,
  OutboundUrlRefusedError,
  parseCidrList,
} from './ssrf-guard';

const PUBLIC_V4 = '93.184.215.14';
const PUBLIC_V6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c';

function policy(overrides: Partial<OutboundPolicy> = {}): OutboundPolicy {
  return { allowCidrs: [], allowLoopback: false, ...overrides };
}

/** A resolver that knows only the names it is given; anything else fails like ENOTFOUND. */
function resolver(table: Record<string, string[]>) {
  const asked: string[] = [];
  const lookup = async (host: string): Promise<string[]> => {
    asked.push(host);
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses;
  };
  return { lookup, asked };
}

async function refusal(promise: Promise<unknown>): Promise<OutboundUrlRefusedError> {
  const error = await promise.then(
    () => expect.unreachable('the URL was accepted'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OutboundUrlRefusedError);
  expect((error as OutboundUrlRefusedError).code).toBe('OUTBOUND_URL_REFUSED');
  return error as OutboundUrlRefusedError;
}

const REFUSED: Array<[string, string, string]> = [
  ['10.0.0.5', 'private 10/8', 'a private address'],
  ['172.16.0.1', 'private 172.16/12 (bottom)', 'a private address'],
  ['172.31.255.254', 'private 172.16/12 (top)', 'a private address'],
  ['192.168.1.1', 'private 192.168/16', 'a private address'],
  ['127.0.0.1', 'loopback', 'a loopback address'],
  ['127.8.9.10', 'loopback anywhere in 127/8', 'a loopback address'],
  ['::1', 'IPv6 loopback', 'a loopback address'],
  ['169.254.169.254', 'the cloud metadata address', 'a link-local address (cloud metadata)'],
  ['169.254.10.20', 'IPv4 link-local', 'a link-local address'],
  ['fe80::1', 'IPv6 link-local', 'a link-local address'],
  ['fe80::1%eth0', 'IPv6 link-local with a zone', 'a link-local address'],
  ['fc00::1', 'unique-local fc00::/7 (fc)', 'a unique-local address'],
  ['fd12:3456::1', 'unique-local fc00::/7 (fd)', 'a unique-local address'],
  ['fd00:ec2::254', 'the AWS IPv6 metadata address', 'a unique-local address'],
  ['100.64.0.1', 'CGNAT 100.64/10 (bottom)', 'a carrier-grade NAT address'],
  ['100.127.255.254', 'CGNAT 100.64/10 (top)', 'a carrier-grade NAT address'],
  ['0.0.0.0', 'IPv4 unspecified', 'an unspecified address'],
  ['::', 'IPv6 unspecified', 'an unspecified address'],
  ['224.0.0.1', 'IPv4 multicast', 'a multicast address'],
  ['239.255.255.250', 'IPv4 multicast (SSDP)', 'a multicast address'],
  ['ff02::1', 'IPv6 multicast', 'a multicast address'],
  ['255.255.255.255', 'broadcast', 'the broadcast address'],
  ['240.0.0.1', 'reserved 240/4', 'a reserved address'],
  ['192.0.2.10', 'documentation TEST-NET-1', 'a reserved address'],
  ['2001:db8::1', 'IPv6 documentation', 'a reserved address'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback', 'a loopback address'],
  ['::ffff:10.0.0.5', 'IPv4-mapped private', 'a private address'],
  ['::ffff:169.254.169.254', 'IPv4-mapped metadata', 'a link-local address (cloud metadata)'],
  ['::ffff:100.64.0.1', 'IPv4-mapped CGNAT', 'a carrier-grade NAT address'],
  ['::ffff:0.0.0.0', 'IPv4-mapped unspecified', 'an unspecified address'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback in hex', 'a loopback address'],
  ['64:ff9b::a00:5', 'NAT64 of 10.0.0.5', 'a NAT64 address that embeds an IPv4 address'],
  ['2002:a00:5::1', '6to4 of 10.0.0.5', 'a 6to4 address that embeds an IPv4 address'],
  ['::7f00:1', 'deprecated IPv4-compatible ::127.0.0.1', 'not a global unicast address'],
];

describe('isAddressAllowed', () => {
  it.each(REFUSED)('refuses %s (%s)', (address, _what, reason) => {
    expect(isAddressAllowed(address, policy())).toEqual({ ok: false, reason });
  });

  it.each([PUBLIC_V4, '8.8.8.8', '1.1.1.1', PUBLIC_V6, '2001:4860:4860::8888', `::ffff:${PUBLIC_V4}`])(
    'allows the public address %s',
    (address) => {
      expect(isAddressAllowed(address, policy())).toEqual({ ok: true });
    },
  );

  it('lets an allow-listed private CIDR through, and only that CIDR', () => {
    const allowing = policy({ allowCidrs: ['10.20.0.0/16'] });
    expect(isAddressAllowed('10.20.3.4', allowing)).toEqual({ ok: true });
    expect(isAddressAllowed('::ffff:10.20.3.4', allowing)).toEqual({ ok: true });
    expect(isAddressAllowed('10.21.0.1', allowing)).toEqual({ ok: false, reason: 'a private address' });
  });

  it('allows loopback only when the flag is on, and the flag opens nothing else', () => {
    const local = policy({ allowLoopback: true });
    expect(isAddressAllowed('127.0.0.1', local)).toEqual({ ok: true });
    expect(isAddressAllowed('::1', local)).toEqual({ ok: true });
    expect(isAddressAllowed('::ffff:127.0.0.1', local)).toEqual({ ok: true });
    expect(isAddressAllowed('0.0.0.0', local)).toEqual({ ok: false, reason: 'an unspecified address' });
    expect(isAddressAllowed('10.0.0.5', local)).toEqual({ ok: false, reason: 'a private address' });
    expect(isAddressAllowed('127.0.0.1', policy())).toEqual({ ok: false, reason: 'a loopback address' });
  });

  it('refuses what is not an IP address, including the legacy forms ipaddr.js would read', () => {
    expect(isAddressAllowed('example.com', policy())).toEqual({ ok: false, reason: 'not an IP address' });
    expect(isAddressAllowed('0x7f.1', policy())).toEqual({ ok: false, reason: 'not an IP address' });
    expect(isAddressAllowed('2130706433', policy())).toEqual({ ok: false, reason: 'not an IP address' });
  });
});

describe('checkOutboundUrl', () => {
  it('accepts a name whose addresses are all public and returns the parsed URL', async () => {
    const { lookup, asked } = resolver({ 'hooks.example.com': [PUBLIC_V4, PUBLIC_V6] });
    const url = await checkOutboundUrl('https://hooks.example.com/in?token=abc', policy(), lookup);
    expect(url).toBeInstanceOf(URL);
    expect(url.href).toBe('https://hooks.example.com/in?token=abc');
    expect(asked).toEqual(['hooks.example.com']);
  });

  it.each(REFUSED.filter(([address]) => !address.includes('%')))(
    'refuses a name resolving to %s (%s)',
    async (address, _what, reason) => {
      const { lookup } = resolver({ 'sink.example.com': [address] });
      const error = await refusal(checkOutboundUrl('https://sink.example.com/events', policy(), lookup));
      expect(error.host).toBe('sink.example.com');
      expect(error.message).toBe(`Outbound URL to sink.example.com refused: resolves to ${address}, ${reason}`);
    },
  );

  it('refuses metadata.google.internal-style names that resolve to the metadata address', async () => {
    const { lookup } = resolver({ 'metadata.google.internal': ['169.254.169.254'] });
    const error = await refusal(
      checkOutboundUrl('http://metadata.google.internal/computeMetadata/v1/', policy(), lookup),
    );
    expect(error.message).toBe(
      'Outbound URL to metadata.google.internal refused: resolves to 169.254.169.254, a link-local address (cloud metadata)',
    );
  });

  it('refuses a name with one public and one private address, whatever the order', async () => {
    for (const addresses of [
      [PUBLIC_V4, '10.0.0.5'],
      ['10.0.0.5', PUBLIC_V4],
    ]) {
      const { lookup } = resolver({ 'mixed.example.com': addresses });
      const error = await refusal(checkOutboundUrl('https://mixed.example.com/', policy(), lookup));
      expect(error.reason).toBe('resolves to 10.0.0.5, a private address');
    }
  });

  it.each([
    ['http://127.0.0.1:8080/', '127.0.0.1', 'a loopback address'],
    ['http://10.0.0.5/', '10.0.0.5', 'a private address'],
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254', 'a link-local address (cloud metadata)'],
    ['http://[::1]:8080/', '::1', 'a loopback address'],
    ['http://[fe80::1]/', 'fe80::1', 'a link-local address'],
    ['http://[fd00::1]/', 'fd00::1', 'a unique-local address'],
    ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1', 'a loopback address'],
    ['http://[::ffff:169.254.169.254]/', '::ffff:a9fe:a9fe', 'a link-local address (cloud metadata)'],
    ['http://0x7f.1/', '127.0.0.1', 'a loopback address'],
    ['http://2130706433/', '127.0.0.1', 'a loopback address'],
    ['http://127.0.0.1./', '127.0.0.1', 'a loopback address'],
    ['http://0.0.0.0:3000/', '0.0.0.0', 'an unspecified address'],
  ])('refuses the IP literal in %s without resolving it', async (url, host, reason) => {
    const { lookup, asked } = resolver({});
    const error = await refusal(checkOutboundUrl(url, policy(), lookup));
    expect(error.message).toBe(`Outbound URL to ${host} refused: is ${reason}`);
    expect(asked).toEqual([]);
  });

  it('accepts public IP literals, bracketed IPv6 included, without resolving them', async () => {
    const { lookup, asked } = resolver({});
    await expect(checkOutboundUrl(`https://${PUBLIC_V4}/x`, policy(), lookup)).resolves.toBeInstanceOf(URL);
    await expect(checkOutboundUrl(`https://[${PUBLIC_V6}]:8443/x`, policy(), lookup)).resolves.toBeInstanceOf(URL);
    expect(asked).toEqual([]);
  });

  it('lets an allow-listed private CIDR through, for names and literals', async () => {
    const { lookup } = resolver({ 'siem.corp.internal': ['10.20.3.4'] });
    const allowing = policy({ allowCidrs: parseCidrList('10.20.0.0/16, fd00:1::/32') });
    await expect(checkOutboundUrl('https://siem.corp.internal/ingest', allowing, lookup)).resolves.toBeInstanceOf(URL);
    await expect(checkOutboundUrl('https://[fd00:1::9]/ingest', allowing, lookup)).resolves.toBeInstanceOf(URL);
    await refusal(checkOutboundUrl('https://10.30.0.1/ingest', allowing, lookup));
    await refusal(checkOutboundUrl('https://[fd00:2::9]/ingest', allowing, lookup));
  });

  it('allows loopback only when the flag is on', async () => {
    const { lookup } = resolver({ localhost: ['127.0.0.1', '::1'] });
    await refusal(checkOutboundUrl('http://localhost:9000/mcp', policy(), lookup));
    await refusal(checkOutboundUrl('http://[::1]:9000/mcp', policy(), lookup));
    const local = policy({ allowLoopback: true });
    await expect(checkOutboundUrl('http://localhost:9000/mcp', local, lookup)).resolves.toBeInstanceOf(URL);
    await expect(checkOutboundUrl('http://[::1]:9000/mcp', local, lookup)).resolves.toBeInstanceOf(URL);
    await expect(checkOutboundUrl('http://127.0.0.1:9000/mcp', local, lookup)).resolves.toBeInstanceOf(URL);
  });

  it('refuses credentials in the URL without naming them', async () => {
    const { lookup, asked } = resolver({ 'hooks.example.com': [PUBLIC_V4] });
    for (const url of [
      'https://alice:hunter2@hooks.example.com/',
      'https://alice@hooks.example.com/',
      'https://:hunter2@hooks.example.com/',
    ]) {
      const error = await refusal(checkOutboundUrl(url, policy(), lookup));
      expect(error.message).toBe('Outbound URL to hooks.example.com refused: credentials in the URL are not allowed');
    }
    expect(asked).toEqual([]);
  });

  it.each([
    'ftp://files.example.com/x',
    'file:///etc/passwd',
    'gopher://example.com:70/',
    'ws://example.com/socket',
    'javascript:alert(1)',
  ])('refuses the non-http scheme in %s', async (url) => {
    const { lookup, asked } = resolver({});
    const error = await refusal(checkOutboundUrl(url, policy(), lookup));
    expect(error.reason).toMatch(/^scheme [a-z]+: is not allowed/);
    expect(asked).toEqual([]);
  });

  it('refuses a host that does not resolve, or resolves to nothing', async () => {
    const { lookup } = resolver({ 'empty.example.com': [] });
    const unknown = await refusal(checkOutboundUrl('https://nowhere.example.com/x', policy(), lookup));
    expect(unknown.message).toBe('Outbound URL to nowhere.example.com refused: does not resolve');
    const empty = await refusal(checkOutboundUrl('https://empty.example.com/x', policy(), lookup));
    expect(empty.reason).toBe('does not resolve');
  });

  it('refuses what is not a URL without echoing it', async () => {
    const error = await refusal(checkOutboundUrl('not a url with secret-token-123', policy(), resolver({}).lookup));
    expect(error.reason).toBe('not a valid URL');
    expect(error.message).not.toContain('secret-token-123');
  });

  it('never puts the path, query, fragment or credentials in the message', async () => {
    const { lookup } = resolver({ 'internal.example.com': ['10.0.0.5'] });
    const urls = [
      'https://internal.example.com/hooks/SECRETPATH?token=SECRETQUERY#SECRETFRAG',
      'https://user:SECRETPASS@internal.example.com/hooks/SECRETPATH?token=SECRETQUERY',
      'ftp://internal.example.com/SECRETPATH?token=SECRETQUERY',
      'http://10.0.0.5/SECRETPATH?token=SECRETQUERY',
      'https://unknown.example.com/SECRETPATH?token=SECRETQUERY',
    ];
    for (const url of urls) {
      const error = await refusal(checkOutboundUrl(url, policy(), lookup));
      for (const secret of ['SECRETPATH', 'SECRETQUERY', 'SECRETFRAG', 'SECRETPASS']) {
        expect(error.message).not.toContain(secret);
        expect(String(error.stack)).not.toContain(secret);
      }
    }
  });
});

describe('parseCidrList', () => {
  it('reads a comma-separated list, ignoring blanks and spaces', () => {
    expect(parseCidrList(' 10.0.0.0/8, fd00::/8 ,,192.168.1.10 ,::1 ')).toEqual([
      '10.0.0.0/8',
      'fd00::/8',
      '192.168.1.10/32',
      '::1/128',
    ]);
  });

  it('is empty for nothing', () => {
    expect(parseCidrList(undefined)).toEqual([]);
    expect(parseCidrList('')).toEqual([]);
    expect(parseCidrList(' , ')).toEqual([]);
  });

  it.each(['10.0.0.0/33', '10/8', 'example.com', '10.0.0.0/', 'fd00::/129', '300.1.1.1/32', '0x0a.0.0.0/8'])(
    'names the bad entry %s',
    (bad) => {
      expect(() => parseCidrList(`192.168.0.0/16, ${bad}`)).toThrow(`Invalid CIDR "${bad}"`);
    },
  );
});
