import type { FakeKubernetes, Resource } from '../support/fake-kubernetes';
import type { K8sObject } from './chart';

/**
 * A rendered Role held to what a driver really calls: the fake API server
 * refuses every request the Role does not grant, as RBAC would, and records
 * the rest, so a test can compare what was used with what was granted.
 */

/** The resources the fake API server serves, by their API group. */
const RESOURCES: Record<Resource, string> = {
  pods: '',
  secrets: '',
  persistentvolumeclaims: '',
  networkpolicies: 'networking.k8s.io',
};
const VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];

/** `group/resource:verb` for every grant of a Role's rules. */
export function grantsOf(role: K8sObject): Set<string> {
  const granted = new Set<string>();
  for (const rule of role.rules) {
    for (const group of rule.apiGroups)
      for (const resource of rule.resources) for (const verb of rule.verbs) granted.add(`${group}/${resource}:${verb}`);
  }
  return granted;
}

/** Makes the fake API server answer 403 to everything the Role does not grant; the Role's grants. */
export function refuseOutside(fake: FakeKubernetes, role: K8sObject): Set<string> {
  const granted = grantsOf(role);
  for (const [resource, group] of Object.entries(RESOURCES) as [Resource, string][]) {
    for (const verb of VERBS) {
      if (!granted.has(`${group}/${resource}:${verb}`))
        fake.refuse({ verb, resource, code: 403, reason: 'Forbidden', message: `${verb} ${resource} is forbidden` });
    }
  }
  return granted;
}

/** `group/resource:verb` of every request the fake API server has had, as the API server's authorizer names them. */
export function callsMade(fake: FakeKubernetes): Set<string> {
  return new Set(
    fake.requests.map((request) => {
      const [, , , , resource, name] =
        /^\/(api\/v1|apis\/([^/]+)\/v1)\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/.exec(request.path)!;
      const watch = request.query.get('watch') === 'true' || request.query.get('watch') === '1';
      const verb =
        request.method === 'GET'
          ? name
            ? 'get'
            : watch
              ? 'watch'
              : 'list'
          : ({ POST: 'create', PATCH: 'patch', PUT: 'update', DELETE: 'delete' } as Record<string, string>)[
              request.method
            ]!;
      return `${RESOURCES[resource as Resource]}/${resource}:${verb}`;
    }),
  );
}
