import { describe, expect, it } from 'vitest';
import { isReplicaAddress } from './mcp-sessions.service';

describe('replica directory entries name a replica and nothing else', () => {
  it('configured (one per pod): the scheme and port ours has, a bare origin', () => {
    const self = 'http://10.1.2.3:8080';
    expect(isReplicaAddress('http://10.1.2.4:8080', self, true)).toBe(true);
    for (const address of [
      'http://10.1.2.4:9090',
      'https://10.1.2.4:8080',
      'http://10.1.2.4:8080/mcp',
      'http://u:p@10.1.2.4:8080',
      'http://10.1.2.4:8080?x=1',
      'not a url',
    ]) {
      expect(isReplicaAddress(address, self, true), address).toBe(false);
    }
  });

  it('unconfigured (replicas on one machine): loopback only, any port', () => {
    expect(isReplicaAddress('http://127.0.0.1:41234', 'http://127.0.0.1:8080', false)).toBe(true);
    for (const address of [
      'http://169.254.169.254:80',
      'http://10.0.0.1:8080',
      'http://localhost:8080',
      'https://127.0.0.1:8080',
    ]) {
      expect(isReplicaAddress(address, 'http://127.0.0.1:8080', false), address).toBe(false);
    }
  });
});
