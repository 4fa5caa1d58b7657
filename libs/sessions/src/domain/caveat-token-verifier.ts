import {
  CaveatTokenError,
  invalidToken,
  peekIdentity,
  TokenGrant,
  TokenIdentity,
  verifyCaveatToken,
} from './caveat-token';

/** verified tokens one verifier keeps; past it the memo starts over */
const DEFAULT_LIMIT = 4_096;

/**
 * Verifies caveat tokens, remembering each one whose chain held. A token is
 * used for hours and its chain is seven HMACs, so a replica checks the chain
 * once per token and afterwards only the token's expiry (a map lookup): that
 * is what keeps verification near one HMAC's cost on the hot path. Only
 * tokens whose chain held are remembered, so guessing cannot fill the memo;
 * forgetting a key (`forgetKey`) drops what it vouched for. `keyOf` is asked
 * only for an identity of the right shape (peekIdentity checks it), and a key
 * it does not have is refused like a broken chain.
 */
export class CaveatTokenVerifier {
  private readonly memo = new Map<string, TokenGrant>();

  constructor(
    private readonly keyOf: (identity: TokenIdentity) => Promise<Buffer | null>,
    private readonly limit = DEFAULT_LIMIT,
  ) {}

  /** The grant of a token this verifier already checked, if it has not expired. */
  known(token: string, nowSeconds: number): TokenGrant | undefined {
    const grant = this.memo.get(token);
    if (grant && nowSeconds >= grant.expiresAt) throw new CaveatTokenError('TOKEN_EXPIRED', 'The token has expired');
    return grant;
  }

  async verify(token: string, nowSeconds: number): Promise<TokenGrant> {
    const known = this.known(token, nowSeconds);
    if (known) return known;
    const { identity, macaroon } = peekIdentity(token);
    const key = await this.keyOf(identity);
    // a removed key and one that never existed answer as a broken chain does: which keys exist is nobody's business
    if (!key) throw invalidToken();
    const grant = verifyCaveatToken(macaroon, identity, key, nowSeconds);
    if (this.memo.size >= this.limit) this.memo.clear();
    this.memo.set(token, grant);
    return grant;
  }

  /** A removed key's tokens must not live on in the memo. */
  forgetKey(organizationId: string, keyId: string): void {
    for (const [token, grant] of this.memo)
      if (grant.organizationId === organizationId && grant.keyId === keyId) this.memo.delete(token);
  }

  clear(): void {
    this.memo.clear();
  }
}
