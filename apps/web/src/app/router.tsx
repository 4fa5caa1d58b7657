import type { ComponentType } from 'react';
import { createBrowserRouter, Navigate } from 'react-router';
import { NotFound, RouteError } from './errors';
import { ReviewFrame } from './review';
import { Shell } from './Shell';
import { Loading } from './ui';

/** What shows while the first page's chunk loads. */
const loading = <Loading what="the page" />;

/** A page loaded on demand: each is its own chunk, fetched when first visited. */
function page(load: () => Promise<{ default: ComponentType }>) {
  return { lazy: async () => ({ Component: (await load()).default }), hydrateFallbackElement: loading };
}

/**
 * The console's pages. A new top-level path needs its first segment in
 * sections.json too: the server answers the page only for those (a reload of
 * `/people/…` works, an unknown `/v1/…` keeps its 404).
 */
export const router = createBrowserRouter([
  { path: '/sign-in', ...page(() => import('../pages/SignIn')), errorElement: <RouteError /> },
  { path: '/sign-in/link', ...page(() => import('../pages/SignInLink')), errorElement: <RouteError /> },
  // a review link's request: in the console for a person signed in to it, else on its own (app/review.tsx)
  {
    path: '/approvals/:id',
    element: <ReviewFrame />,
    errorElement: <RouteError />,
    hydrateFallbackElement: loading,
    children: [{ index: true, ...page(() => import('../pages/Approval')) }],
  },
  {
    element: <Shell />,
    errorElement: <RouteError />,
    hydrateFallbackElement: loading,
    children: [
      { index: true, element: <Navigate to="/overview" replace /> },
      { path: 'overview', ...page(() => import('../pages/Overview')) },
      { path: 'overview/:ws', ...page(() => import('../pages/Overview')) },
      { path: 'workspaces', ...page(() => import('../pages/Workspaces')) },
      { path: 'workspaces/:ws', ...page(() => import('../pages/Workspace')) },
      { path: 'workspaces/:ws/policy', ...page(() => import('../pages/Policy')) },
      { path: 'workspaces/:ws/approvals', ...page(() => import('../pages/Approvals')) },
      { path: 'workspaces/:ws/audit', ...page(() => import('../pages/Audit')) },
      { path: 'workspaces/:ws/vault', ...page(() => import('../pages/Vault')) },
      { path: 'workspaces/:ws/sandboxes', ...page(() => import('../pages/Sandboxes')) },
      { path: 'workspaces/:ws/sandboxes/:name', ...page(() => import('../pages/Sandbox')) },
      { path: 'workspaces/:ws/gateways', ...page(() => import('../pages/Gateways')) },
      { path: 'workspaces/:ws/pool', ...page(() => import('../pages/Pool')) },
      { path: 'workspaces/:ws/sessions', ...page(() => import('../pages/Sessions')) },
      { path: 'workspaces/:ws/sessions/:id', ...page(() => import('../pages/Session')) },
      { path: 'workspaces/:ws/connections', ...page(() => import('../pages/Connections')) },
      { path: 'workspaces/:ws/connected-clients', ...page(() => import('../pages/ConnectedClients')) },
      { path: 'audit', ...page(() => import('../pages/Audit')) },
      { path: 'webhooks', ...page(() => import('../pages/Webhooks')) },
      { path: 'people', ...page(() => import('../pages/People')) },
      { path: 'tokens', ...page(() => import('../pages/Tokens')) },
      { path: 'catalog', ...page(() => import('../pages/Catalog')) },
      { path: 'catalog/:name', ...page(() => import('../pages/CatalogServer')) },
      { path: 'organization/identity-provider', ...page(() => import('../pages/IdentityProvider')) },
      { path: 'organization/oauth', ...page(() => import('../pages/OauthSettings')) },
      { path: 'account/connected-clients', ...page(() => import('../pages/OwnClients')) },
      { path: '*', element: <NotFound /> },
    ],
  },
]);
