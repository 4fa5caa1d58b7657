/**
 * What tenant code with network access (a pool instance, an `egress`
 * sandbox) may never reach, whichever driver runs it: anything but the public
 * internet. Private, loopback, link-local (the cloud metadata service among
 * them), CGNAT, benchmarking, multicast and reserved ranges; the cluster, the
 * node and the control plane's database all live in these. The Kubernetes
 * drivers' NetworkPolicies and the local sandbox driver's routing rules are
 * built from these lists.
 */
export const EGRESS_EXCEPT_V4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
];
export const EGRESS_EXCEPT_V6 = ['::1/128', '::ffff:0:0/96', '64:ff9b::/96', 'fc00::/7', 'fe80::/10', 'ff00::/8'];
