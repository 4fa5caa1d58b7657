import type { AppConfig } from '@aileron/config';
import { loadKubeConfig } from '@aileron/kubernetes';
import { KubernetesSandboxDriver, type KubernetesSandboxOptions } from './kubernetes-sandbox-driver';

/** The Kubernetes sandbox driver's options from the configuration (the Helm chart's values reach it through these). */
export function kubernetesSandboxOptions(config: AppConfig): Omit<KubernetesSandboxOptions, 'kubeConfig' | 'log'> {
  const { storage } = config.sandboxes;
  return {
    namespace: config.sandboxes.kubernetesNamespace,
    storage: {
      files: storage.files,
      history: storage.history,
      ...(storage.storageClassName ? { storageClassName: storage.storageClassName } : {}),
    },
    ...(config.sandboxes.image ? { image: config.sandboxes.image } : {}),
    versionMismatch: config.sandboxes.versionMismatch,
    egressAllowCidrs: config.pool.egressAllowCidrs,
    egressExceptCidrs: config.pool.egressExceptCidrs,
    ...(config.pool.controlPlaneNamespace ? { controlPlaneNamespace: config.pool.controlPlaneNamespace } : {}),
  };
}

/** The sandboxes' driver when the configuration names Kubernetes. */
export function kubernetesSandboxDriverFor(config: AppConfig, log: (line: string) => void): KubernetesSandboxDriver {
  return new KubernetesSandboxDriver({ ...kubernetesSandboxOptions(config), kubeConfig: loadKubeConfig(), log });
}
