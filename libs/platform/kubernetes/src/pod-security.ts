import type { V1PodSecurityContext, V1SecurityContext } from '@kubernetes/client-node';

/** The uid and gid every pod of ours runs as: the user of the pool's runner image and of the sandbox image. */
export const POD_UID = 10001;

/** A pod as the `restricted` Pod Security Standard wants it: not root (POD_UID), the runtime's seccomp profile. */
export function restrictedPodSecurityContext(): V1PodSecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: POD_UID,
    runAsGroup: POD_UID,
    fsGroup: POD_UID,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** A container that cannot gain privileges, holds no capabilities and cannot change its own image's files. */
export function restrictedContainerSecurityContext(): V1SecurityContext {
  return {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ['ALL'] },
  };
}
