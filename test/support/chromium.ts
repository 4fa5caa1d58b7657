import { Browser, chromium } from 'playwright-core';

/** Debian's Chromium, headless, quiet: nothing of its own goes to the network, so a test sees only its pages' traffic. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}
