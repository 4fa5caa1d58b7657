import { Anchor, Container, Title } from '@mantine/core';
import { useMutation } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../api/client';
import { takeWhereAfterSignIn } from '../app/session';
import { ErrorState, Loading } from '../app/ui';

/**
 * The page a one-time sign-in link opens. The code is in the fragment, which
 * the browser never sends (no log, no Referer); the page exchanges it once
 * for the session cookie and drops it from the address bar.
 */
export default function SignInLink() {
  const navigate = useNavigate();
  const started = useRef(false);
  const redeem = useMutation({
    mutationFn: (code: string) => unwrap(api.POST('/v1/auth/sign-in-link', { body: { code } })),
    // where the person was going when the console asked them to sign in, else the overview
    onSuccess: () => void navigate(takeWhereAfterSignIn(), { replace: true }),
    // the page says it itself, below
    meta: { shownInPage: () => true },
  });
  useEffect(() => {
    if (started.current) return;
    started.current = true;
    const code = new URLSearchParams(window.location.hash.slice(1)).get('code') ?? '';
    window.history.replaceState(null, '', window.location.pathname);
    redeem.mutate(code);
  }, [redeem]);
  return (
    <Container size={460} py={80} component="main">
      <Title order={1} size="h2" mb="md">
        Signing in
      </Title>
      {redeem.isError ? (
        <>
          <ErrorState error={redeem.error} />
          <Anchor component={Link} to="/sign-in" mt="md" display="block">
            Other ways to sign in
          </Anchor>
        </>
      ) : (
        <Loading what="your session" />
      )}
    </Container>
  );
}
