import { Anchor, Button, Card, Group, PasswordInput, Stack, Text, Title } from '@mantine/core';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useOutletContext, useParams, useSearchParams } from 'react-router';
import { api, ApiProblem, unwrap } from '../api/client';
import { type ReviewCredential, type ReviewFrameState, setReviewToken, useReviewCredential } from '../app/review';
import { identityProviderSignIn } from '../app/session';
import { ErrorState, Loading, PageTitle } from '../app/ui';
import { type Approval as Request, ApprovalView, type Decision, decideThroughApi } from './approval-view';

/** The request as this reader may see it: with the link, with the pasted token, or as the signed-in person. */
function read(id: string, credential: ReviewCredential): Promise<Request> {
  if (credential.kind === 'link')
    return unwrap(api.GET('/review/{id}/request', { params: { path: { id }, query: { link: credential.link } } }));
  return unwrap(api.GET('/v1/approvals/{id}', { params: { path: { id } }, headers: bearer(credential) }));
}

function decide(id: string, credential: ReviewCredential, decision: Decision, reason: string): Promise<Request> {
  if (credential.kind === 'link')
    return unwrap(
      api.POST('/review/{id}/decision', {
        params: { path: { id } },
        body: { link: credential.link, decision, ...(reason ? { reason } : {}) },
      }),
    );
  return decideThroughApi(id, decision, reason, bearer(credential));
}

function bearer(credential: ReviewCredential): Record<string, string> {
  return credential.kind === 'token' ? { authorization: `Bearer ${credential.token}` } : {};
}

/**
 * One approval request, where a review link (`/review/<id>`) lands: the view
 * the Approvals inbox shows, decided with whatever the reader came with.
 */
export default function Approval() {
  const id = useParams().id!;
  const credential = useReviewCredential();
  // set only in the plain frame, when the browser session was to be the credential and is not there
  const frame = useOutletContext<ReviewFrameState | undefined>();
  const sessionError = frame?.sessionError ?? null;
  const queryClient = useQueryClient();
  const key = ['approval', id, credential.kind];
  const request = useQuery({ queryKey: key, queryFn: () => read(id, credential), enabled: !sessionError });
  const signedOut = sessionError instanceof ApiProblem && sessionError.status === 401;
  return (
    <>
      <PageTitle>Approval request</PageTitle>
      <Stack>
        {credential.kind === 'link' && (
          <Text size="sm" c="dimmed">
            With your one-time link: it decides once, as the person it was sent to.
          </Text>
        )}
        {credential.kind === 'token' && (
          <Group gap="sm">
            <Text size="sm" c="dimmed">
              With the token you pasted (kept in this tab only).
            </Text>
            <Button size="xs" variant="default" onClick={() => setReviewToken(null)}>
              Forget the token
            </Button>
          </Group>
        )}
        {signedOut ? (
          <SignIn id={id} />
        ) : sessionError ? (
          <ErrorState error={sessionError} retry={frame?.retrySession} />
        ) : request.isPending ? (
          <Loading what="the request" />
        ) : request.error ? (
          <ErrorState error={request.error} retry={() => void request.refetch()} />
        ) : (
          <ApprovalView
            approval={request.data}
            decide={(decision, reason) => decide(id, credential, decision, reason)}
            onDecided={(answer) => queryClient.setQueryData(key, answer)}
          />
        )}
      </Stack>
    </>
  );
}

/** Not signed in: the organisation's identity provider, the console's other ways in, or a pasted token. */
function SignIn({ id }: { id: string }) {
  const [params] = useSearchParams();
  const organization = params.get('organization');
  const returnTo = `/approvals/${id}`;
  const [token, setToken] = useState('');
  const others = new URLSearchParams({ return_to: returnTo, ...(organization ? { organization } : {}) });
  return (
    <Card withBorder component="section" aria-labelledby="sign-in-title" maw={560}>
      <Stack>
        <Title order={2} size="h4" id="sign-in-title">
          Sign in to review it
        </Title>
        {organization ? (
          <>
            <Button component="a" href={identityProviderSignIn(organization, returnTo)} w="fit-content">
              Sign in with your identity provider
            </Button>
            <Anchor component={Link} to={`/sign-in?${others}`} size="sm">
              Other ways to sign in
            </Anchor>
          </>
        ) : (
          <Group>
            <Button component={Link} to={`/sign-in?${others}`}>
              Sign in to Aileron
            </Button>
            <Text size="sm" c="dimmed">
              and come back to this request
            </Text>
          </Group>
        )}
        <form
          onSubmit={(event) => {
            event.preventDefault();
            if (token.trim()) setReviewToken(token.trim());
          }}
        >
          <Group align="flex-end">
            <PasswordInput
              label="Or paste a token"
              description="An Aileron API token or your organisation's sign-in token (JWT), kept in this tab only"
              value={token}
              onChange={(e) => setToken(e.currentTarget.value)}
              autoComplete="off"
              style={{ flex: 1 }}
            />
            <Button type="submit" variant="default">
              Review with it
            </Button>
          </Group>
        </form>
      </Stack>
    </Card>
  );
}
