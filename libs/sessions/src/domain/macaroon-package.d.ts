// The `macaroon` package (a dev dependency, the format's JavaScript reference) ships no types; the spec uses this much.
declare module 'macaroon' {
  interface JsMacaroon {
    addFirstPartyCaveat(caveat: Uint8Array): void;
    verify(rootKey: Uint8Array, check: (condition: string) => string | null): void;
    exportJSON(): unknown;
  }
  export function importMacaroon(data: Uint8Array | string): JsMacaroon;
  export function newMacaroon(options: {
    identifier: string | Uint8Array;
    rootKey: Uint8Array;
    version: 1 | 2;
    location?: string;
  }): JsMacaroon;
}
