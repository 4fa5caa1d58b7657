import type { AppConfig } from '@aileron/config';
import { loadKubeConfig } from '@aileron/kubernetes';
import { KubernetesDriver, type KubernetesDriverOptions } from './kubernetes-driver';

/** The Kubernetes driver's options from the configuration (the Helm chart's values reach it through these). */
export function kubernetesPoolOptions(config: AppConfig): Omit<KubernetesDriverOptions, 'kubeConfig' | 'log'> {
  return {
    namespace: config.pool.kubernetesNamespace,
    runnerImage: config.pool.runnerImage,
    egressAllowCidrs: config.pool.egressAllowCidrs,
    egressExceptCidrs: config.pool.egressExceptCidrs,
    controlPlanePod: config.pool.controlPlanePod,
    ...(config.pool.controlPlaneNamespace ? { controlPlaneNamespace: config.pool.controlPlaneNamespace } : {}),
  };
}

/** The pool's driver when the configuration names Kubernetes. */
export function kubernetesDriverFor(config: AppConfig, log: (line: string) => void): KubernetesDriver {
  return new KubernetesDriver({ ...kubernetesPoolOptions(config), kubeConfig: loadKubeConfig(), log });
}
