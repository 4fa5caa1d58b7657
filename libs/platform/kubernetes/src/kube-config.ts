import { KubeConfig } from '@kubernetes/client-node';

/**
 * How every driver reaches the Kubernetes API: in a pod, its service
 * account (the variable Kubernetes sets in every container says so);
 * elsewhere, what kubectl would use ($KUBECONFIG, ~/.kube/config).
 */
export function loadKubeConfig(): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (process.env.KUBERNETES_SERVICE_HOST) kubeConfig.loadFromCluster();
  else kubeConfig.loadFromDefault();
  return kubeConfig;
}
