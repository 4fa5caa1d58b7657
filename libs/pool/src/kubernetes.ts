// The Kubernetes driver, apart from the pool's barrel: @kubernetes/client-node takes about a
// second of CPU and ~28 MB to load, and a control plane on the local driver never needs it.
// The pool module loads this file only when the configuration names the Kubernetes driver.
export { KubernetesDriver } from './drivers/kubernetes/kubernetes-driver';
export type { KubernetesDriverOptions } from './drivers/kubernetes/kubernetes-driver';
export { kubernetesDriverFor, kubernetesPoolOptions } from './drivers/kubernetes/from-config';
// what the Kubernetes driver's pods expect of the cluster and the runner image: the Helm chart and the images are tested against these
export { HOME as POOL_POD_HOME, MANAGED_BY, RUN_AS as POOL_POD_UID } from './drivers/kubernetes/manifests';
