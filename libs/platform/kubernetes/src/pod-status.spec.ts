import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { exitReason, hasEnded, hopelessReason, isReady, pendingReason } from './pod-status';

function aPod(phase: string, statuses: V1ContainerStatus[], containers = ['main']): V1Pod {
  return {
    spec: { restartPolicy: 'Never', containers: containers.map((name) => ({ name })) },
    status: {
      phase,
      containerStatuses: statuses,
      conditions: phase === 'Running' ? [{ type: 'Ready', status: 'True' }] : [],
    },
  };
}

function aStatus(name: string, state: V1ContainerStatus['state']): V1ContainerStatus {
  return { name, state, ready: false, restartCount: 0, image: 'i', imageID: '' };
}

describe('what a pod’s status means to the drivers', () => {
  it('ready only Running with the Ready condition; ended when a container of a never-restarted pod ended', () => {
    expect(isReady(aPod('Running', [aStatus('main', { running: {} })]))).toBe(true);
    expect(isReady(aPod('Pending', []))).toBe(false);
    expect(isReady(undefined)).toBe(false);
    const twoContainers = aPod(
      'Running',
      [aStatus('sandbox', { running: {} }), aStatus('history', { terminated: { exitCode: 1 } })],
      ['sandbox', 'history'],
    );
    expect(hasEnded(twoContainers)).toBe(true);
    expect(hasEnded(aPod('Running', [aStatus('main', { running: {} })]))).toBe(false);
    expect(hasEnded(aPod('Succeeded', []))).toBe(true);
  });

  it('why a pod ended, naming the container in a pod of several, never the termination message (it may be a credential)', () => {
    const oom = aPod('Failed', [
      aStatus('main', { terminated: { exitCode: 137, reason: 'OOMKilled', message: 'TOKEN=s3cret' } }),
    ]);
    expect(exitReason(oom)).toBe('pod Failed: OOMKilled (exit code 137)');
    const plain = aPod(
      'Failed',
      [
        aStatus('sandbox', { running: {} }),
        aStatus('history', { terminated: { exitCode: 2, reason: 'Error', message: 'TOKEN=s3cret' } }),
      ],
      ['sandbox', 'history'],
    );
    expect(exitReason(plain)).toBe('pod Failed: container history: exited with code 2');
    expect(exitReason(oom) + exitReason(plain)).not.toContain('s3cret');
  });

  it('a container that will not start without someone changing something is hopeless; one pulling is only pending', () => {
    const backoff = aPod('Pending', [
      aStatus('main', { waiting: { reason: 'ImagePullBackOff', message: 'not found' } }),
    ]);
    expect(hopelessReason(backoff)).toBe('ImagePullBackOff: not found');
    const pulling = aPod('Pending', [aStatus('main', { waiting: { reason: 'ErrImagePull' } })]);
    expect(hopelessReason(pulling)).toBeUndefined();
    expect(pendingReason(pulling)).toBe('ErrImagePull');
    const unscheduled: V1Pod = {
      spec: { containers: [{ name: 'main' }] },
      status: {
        phase: 'Pending',
        conditions: [
          { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes are available' },
        ],
      },
    };
    expect(pendingReason(unscheduled)).toBe('Unschedulable: 0/3 nodes are available');
    expect(pendingReason(undefined)).toBe('no status yet');
  });
});
