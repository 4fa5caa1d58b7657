/** test/support/form-browser.mjs, for the TypeScript that imports it. */

/** One step of a browser's way: where it went and what it was answered (`location`: where it was sent on). */
export interface Step {
  url: string;
  status: number;
  location: string | null;
  text: string;
}

export declare class Browser {
  remember(origin: string, response: Response): void;
  cookie(origin: string): string | undefined;
  signInWithLink(base: string, token: string): Promise<void>;
  open(url: string, stopAt?: (url: URL) => boolean, form?: Record<string, string>): Promise<Step[]>;
  browse(url: string, form?: Record<string, string>): Promise<Step>;
  allow(page: Step): Promise<Step>;
}
