/** test/conformance/browser.mjs, for the TypeScript that imports it. */
export declare class Browser {
  constructor(base: string);
  readonly cookies: Map<string, string>;
  remember(response: Response): void;
  cookie(): string;
  signIn(token: string): Promise<void>;
  browse(url: string, form?: Record<string, string>): Promise<{ url: string; status: number; text: string }>;
}
