// The Kubernetes sandbox driver, apart from the sandboxes' barrel: @kubernetes/client-node takes
// about a second of CPU and ~28 MB to load, and a control plane on the local driver never needs
// it. The sandboxes module loads this file only when the configuration names the Kubernetes driver.
export { KubernetesSandboxDriver } from './drivers/kubernetes/kubernetes-sandbox-driver';
export type { KubernetesSandboxOptions } from './drivers/kubernetes/kubernetes-sandbox-driver';
export { kubernetesSandboxDriverFor, kubernetesSandboxOptions } from './drivers/kubernetes/from-config';
export { DEFAULT_PORTS as SANDBOX_RUNNER_PORTS, SANDBOX_SELECTOR } from './drivers/kubernetes/manifests';
