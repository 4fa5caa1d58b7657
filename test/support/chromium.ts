import { existsSync } from 'node:fs';
import { Browser, chromium } from 'playwright-core';

/**
 * Chromium's headless shell (Debian's chromium-headless-shell: the same engine, built without the browser's
 * windowing layer, what Playwright itself runs for headless tests), else the full Chromium: the console's test
 * files spent a third less CPU in the shell (console-keyboard: 27-31 against 38-40 CPU-s, alternating runs).
 */
const EXECUTABLE = ['/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].find((path) => existsSync(path));

/** Debian's Chromium, headless, quiet: nothing of its own goes to the network, so a test sees only its pages' traffic. */
export function launchChromium(): Promise<Browser> {
  if (EXECUTABLE === undefined)
    throw new Error('no Chromium: install Debian package chromium-headless-shell (or chromium)');
  return chromium.launch({
    executablePath: EXECUTABLE,
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
