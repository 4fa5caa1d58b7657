import { Container, Text } from '@mantine/core';
import { Suspense, useSyncExternalStore } from 'react';
import { Outlet, useLocation } from 'react-router';
import { useSession } from './session';
import { Shell } from './Shell';
import { Loading } from './ui';

/**
 * How the reader of a review link is known: the one-time link it carried
 * (in the fragment, which no request sends), a token they pasted (kept in this
 * tab only, as the review page kept it), else the browser session.
 */
export type ReviewCredential = { kind: 'link'; link: string } | { kind: 'token'; token: string } | { kind: 'session' };

const TOKEN = 'aileron.review-token';
const listeners = new Set<() => void>();

/** A pasted token for reviewing in this tab, or null to forget it. */
export function setReviewToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN, token);
  else sessionStorage.removeItem(TOKEN);
  listeners.forEach((listener) => listener());
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function useReviewCredential(): ReviewCredential {
  const { hash } = useLocation();
  const token = useSyncExternalStore(subscribe, () => sessionStorage.getItem(TOKEN));
  const link = new URLSearchParams(hash.slice(1)).get('link');
  if (link) return { kind: 'link', link };
  if (token) return { kind: 'token', token };
  return { kind: 'session' };
}

/**
 * What the plain frame tells the request's page: why there is no browser
 * session to read it with, when that is the credential (a 401 means the reader
 * is to be offered the ways in). Under the console's own frame there is none.
 */
export interface ReviewFrameState {
  sessionError: unknown;
  retrySession: () => void;
}

/**
 * The frame of a request opened from a review link: the console itself for a
 * person signed in to it, else a plain page (a link's holder may have no
 * account here at all, and one who is not signed in is offered the ways in).
 * The page reads the session from here: a second reader of a failed session
 * would ask again on mounting, and every answer would mount it anew.
 */
export function ReviewFrame() {
  const credential = useReviewCredential();
  const session = useSession();
  if (credential.kind === 'session' && session.isPending) return <Loading what="your session" />;
  if (credential.kind === 'session' && session.data) return <Shell />;
  const state: ReviewFrameState = {
    sessionError: credential.kind === 'session' ? session.error : null,
    retrySession: () => void session.refetch(),
  };
  return (
    <Container size="md" py="xl" component="main">
      <Text fw={700} mb="md">
        Aileron
      </Text>
      <Suspense fallback={<Loading what="the page" />}>
        <Outlet context={state} />
      </Suspense>
    </Container>
  );
}
