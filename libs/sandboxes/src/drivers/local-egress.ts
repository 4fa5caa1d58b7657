import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { EGRESS_EXCEPT_V4, EGRESS_EXCEPT_V6 } from '@aileron/net';
import { SandboxStartError } from './driver';

/**
 * `network: egress` on the local driver: the sandbox gets a network namespace
 * of its own, connected to the outside by pasta (a user-space TCP/UDP/ICMP
 * stack, Debian package `passt`), with the pool's outbound rules applied as
 * routing-policy rules inside it before the sandbox starts. It never shares
 * the host's network: the host's loopback is another namespace's, pasta
 * forwards no port either way and does not map the gateway to the host, and
 * the private, link-local and metadata ranges and the host's own addresses
 * are refused by the kernel (`prohibit`: connect() fails with EACCES at once).
 */
export interface EgressOptions {
  /** ranges let through besides the public internet (AILERON_POOL_EGRESS_ALLOW_CIDRS, as for the pool's pods) */
  allowCidrs?: readonly string[];
  pastaPath?: string;
  /** iproute2's `ip`; default the first of the usual places */
  ipPath?: string;
  setprivPath?: string;
  unsharePath?: string;
  bashPath?: string;
}

/** What the rules are made of, apart from the fixed ranges: read from the machine at each start. */
export interface EgressFacts {
  allowCidrs: readonly string[];
  /** every address of this machine's interfaces: pasta would connect to them from the host's side */
  hostAddresses: readonly string[];
  /** the name servers of /etc/resolv.conf (bound into the sandbox): port 53 on them stays open */
  resolvers: readonly string[];
}

// rules before the `main` table (32766); the kernel's `local` table (0) keeps the namespace's own loopback first
const RESOLVERS_PREF = 100;
const HOST_PREF = 110;
const ALLOWED_PREF = 120;
const RANGES_PREF = 130;

/**
 * `ip -batch` lines per family. Their preferences order them: DNS to the resolvers, then the
 * host's own addresses refused (an allowed range must not reopen the control
 * plane's machine), then the operator's ranges, then the pool's refused ranges.
 */
export function egressRules(facts: EgressFacts): { v4: string[]; v6: string[] } {
  const rules = { v4: [] as string[], v6: [] as string[] };
  const add = (cidr: string, rule: (to: string) => string[]): void => {
    const bare = cidr.split('/')[0]!;
    const family = isIP(bare);
    if (family === 0) return;
    const to = cidr.includes('/') ? cidr : `${bare}/${family === 4 ? 32 : 128}`;
    rules[family === 4 ? 'v4' : 'v6'].push(...rule(to));
  };
  for (const resolver of unique(facts.resolvers)) {
    add(resolver, (to) =>
      ['udp', 'tcp'].map((proto) => `rule add pref ${RESOLVERS_PREF} to ${to} ipproto ${proto} dport 53 lookup main`),
    );
  }
  for (const address of unique(facts.hostAddresses))
    add(address, (to) => [`rule add pref ${HOST_PREF} to ${to} prohibit`]);
  for (const cidr of unique(facts.allowCidrs))
    add(cidr, (to) => [`rule add pref ${ALLOWED_PREF} to ${to} lookup main`]);
  for (const cidr of [...EGRESS_EXCEPT_V4, ...EGRESS_EXCEPT_V6])
    add(cidr, (to) => [`rule add pref ${RANGES_PREF} to ${to} prohibit`]);
  return rules;
}

/**
 * The command that runs `command` (bubblewrap and its arguments) with egress
 * as described above. Throws SandboxStartError when a program it needs is
 * missing: an egress sandbox fails to start rather than share the host's network.
 */
export function egressCommand(command: readonly string[], options: EgressOptions = {}): string[] {
  const pasta = options.pastaPath ?? '/usr/bin/pasta';
  if (!existsSync(pasta))
    throw new SandboxStartError(
      `network egress needs pasta (${pasta}, Debian package passt), which is not installed; an egress sandbox never uses the host's network instead`,
    );
  const ip =
    options.ipPath ??
    ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'].find((path) => existsSync(path)) ??
    '/usr/sbin/ip';
  const setpriv = options.setprivPath ?? '/usr/bin/setpriv';
  const unshare = options.unsharePath ?? '/usr/bin/unshare';
  const bash = options.bashPath ?? '/bin/bash';
  for (const [path, what] of [
    [ip, 'ip (Debian package iproute2)'],
    [setpriv, 'setpriv (util-linux)'],
    [unshare, 'unshare (util-linux)'],
    [bash, 'bash'],
  ] as const) {
    if (!existsSync(path))
      throw new SandboxStartError(`network egress needs ${what} at ${path}, which is not installed`);
  }
  const rules = egressRules({
    allowCidrs: options.allowCidrs ?? [],
    hostAddresses: hostAddresses(),
    resolvers: resolvers(),
  });
  // the wrapper dies with the control plane (as bwrap's --die-with-parent did), and takes the sandbox and pasta with it
  // --norc: with a socket on stdin (the runner's channel) bash would take itself for a remote shell and read root's ~/.bashrc
  return [
    setpriv,
    '--pdeathsig',
    'KILL',
    bash,
    '--noprofile',
    '--norc',
    '-c',
    OUTER,
    'aileron-egress',
    INNER,
    pasta,
    ip,
    unshare,
    setpriv,
    bash,
    rules.v4.join('\n'),
    rules.v6.join('\n'),
    ...command,
  ];
}

function hostAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flatMap((addresses) => addresses ?? [])
    .map((address) => address.address);
}

function resolvers(): string[] {
  let text: string;
  try {
    text = readFileSync('/etc/resolv.conf', 'utf8');
  } catch {
    return [];
  }
  // a scoped address (fe80::1%eth0) cannot be named in a rule; one on loopback stays the namespace's own whatever the rules say
  return [...text.matchAll(/^\s*nameserver\s+(\S+)/gm)]
    .map((match) => match[1]!)
    .filter((address) => isIP(address) !== 0);
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}

/**
 * Runs in the new namespace, as root of the host (it was made by `unshare
 * --net` alone, so the namespace belongs to the host's user namespace and
 * nothing in the sandbox's own can change its rules): the rules first, then
 * "ready" on fd 9, then it waits for "go" on fd 8 (pasta attached) and
 * becomes bubblewrap.
 */
const INNER = `set -eu
ip=$1 rules4=$2 rules6=$3
shift 3
"$ip" link set lo up
if [ -n "$rules4" ]; then "$ip" -4 -batch - <<<"$rules4"; fi
# a kernel without IPv6 has no IPv6 to refuse
if [ -n "$rules6" ] && [ -e /proc/net/if_inet6 ]; then "$ip" -6 -batch - <<<"$rules6"; fi
echo ready >&9
exec 9>&-
IFS= read -r go <&8 && [ "$go" = go ] || exit 70
exec 8<&-
exec "$@"`;

/**
 * Runs on the host: starts the inner half (its standard streams and other
 * descriptors are the runner's), attaches pasta to the inner's namespace
 * once its rules are in, lets it go, and stops pasta when it ends. pasta
 * runs as root only because the namespace is root's: it keeps
 * CAP_NET_BIND_SERVICE and CAP_SYS_ADMIN, in mount and user namespaces of
 * its own with an empty root, under its seccomp filter.
 */
const OUTER = `set -u
inner=$1 pasta=$2 ip=$3 unshare=$4 setpriv=$5 bash=$6 rules4=$7 rules6=$8
shift 8
fail() { echo "network egress: $1" >&2; [ -n "\${NET_PID:-}" ] && kill -KILL "$NET_PID" 2>/dev/null; exit 70; }
exec {runner_in}<&0 {runner_out}>&1
coproc NET { exec "$unshare" --net -- "$bash" --noprofile --norc -c "$inner" aileron-egress-net "$ip" "$rules4" "$rules6" "$@" 8<&0 9>&1 0<&"$runner_in" 1>&"$runner_out" {runner_in}<&- {runner_out}>&-; }
net_out=\${NET[0]} net_in=\${NET[1]}
# pasta must hold none of the runner's descriptors
for fd in /proc/self/fd/*; do
  fd=\${fd##*/}
  case "$fd" in 0 | 1 | 2 | "$net_out" | "$net_in") ;; *) eval "exec $fd>&-" ;; esac
done
exec 0</dev/null 1>/dev/null
IFS= read -r ready <&"$net_out" && [ "$ready" = ready ] || fail "the sandbox's network namespace and its rules could not be made"
exec {netns}<"/proc/$NET_PID/ns/net" || fail "the sandbox's network namespace could not be opened"
# never attach pasta to (and so reconfigure) the host's own network
[ "$(readlink "/proc/self/fd/$netns")" != "$(readlink /proc/self/ns/net)" ] || fail "the sandbox has no network namespace of its own"
exec {pasta_out}< <(exec "$setpriv" --pdeathsig KILL "$pasta" -f -q --runas 0:0 --config-net -t none -u none -T none -U none --no-map-gw --netns "/proc/self/fd/$netns" -P /dev/stdout {net_out}<&- {net_in}>&-)
pasta_job=$!
# pasta writes its pid file (here: the pipe) once the namespace's interface and routes are up
IFS= read -r -t 20 _ <&"$pasta_out" || fail "pasta could not connect the sandbox's network namespace"
exec {netns}<&- {pasta_out}<&-
echo go >&"$net_in"
wait "$NET_PID"
code=$?
kill "$pasta_job" 2>/dev/null
wait "$pasta_job" 2>/dev/null
exit "$code"`;
