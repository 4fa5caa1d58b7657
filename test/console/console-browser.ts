import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Browser, BrowserContext, BrowserContextOptions, Locator, Page, Request } from 'playwright-core';
import { expect } from 'vitest';
import { launchChromium } from '../support/chromium';
import type { TestControlPlane } from '../support/control-plane';

const SHOTS = join(process.cwd(), 'test-results', 'console');
/**
 * No transition running and no dialog, menu or list of options drawn part
 * transparent (Mantine's transitions start a frame after the element is in
 * the page, and a closing one stays in it, fading, without its content).
 */
const SETTLED = `(() => {
  if (document.getAnimations().some((a) => a instanceof CSSTransition && a.playState === 'running')) return false;
  return [...document.querySelectorAll('[role="dialog"], [role="menu"], [role="listbox"]')].every((dialog) => {
    for (let e = dialog; e; e = e.parentElement) if (Number(getComputedStyle(e).opacity) < 1) return false;
    return true;
  });
})()`;
/** A request on its way longer than this is held by the server (a long-poll, a change it waits on), not loading. */
const HELD_MS = 2_000;
const AXE = readFileSync(createRequire(join(process.cwd(), 'package.json')).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * Debian's Chromium driven by playwright-core, as an admin's browser: every
 * page it opens is watched for script errors and for what the
 * Content-Security-Policy refused, each a broken page. Each console test file
 * starts one beside its control plane.
 */
/**
 * Every console test's browser context: a laptop's window, and a person whose system asks for less motion, so
 * dialogs and menus appear without their transitions and a page settles at once (console-keyboard.test.ts shows
 * both ways; the console files spent ~6% less CPU so).
 */
const CONTEXT = { viewport: { width: 1280, height: 800 }, reducedMotion: 'reduce' } as const;

export class ConsoleBrowser {
  /** what went wrong in a page since the last `takeProblems()` */
  private readonly problems: string[] = [];
  /** each watched page's requests still on their way, but for event streams, which stay open, and when each began */
  private readonly inFlight = new Map<Page, Map<Request, number>>();

  private constructor(
    readonly browser: Browser,
    readonly context: BrowserContext,
    readonly page: Page,
  ) {}

  static async start(cp: TestControlPlane): Promise<ConsoleBrowser> {
    mkdirSync(SHOTS, { recursive: true });
    // as an operator sets AILERON_PUBLIC_URL: the identity provider sends the browser back there
    cp.cp.config.publicUrl = cp.url;
    const browser = await launchChromium();
    const context = await browser.newContext(CONTEXT);
    const page = await context.newPage();
    const it = new ConsoleBrowser(browser, context, page);
    it.watch(page);
    return it;
  }

  /** Another browser context like the first (another person, or the same one's other browser), as `options` change it. */
  newContext(options: BrowserContextOptions = {}): Promise<BrowserContext> {
    return this.browser.newContext({ ...CONTEXT, ...options });
  }

  /** Signs the first page in as the embedded owner, with the one-time link `npm start` printed. */
  async signInAsOwner(cp: TestControlPlane): Promise<void> {
    await this.page.goto(cp.cp.signInLink!);
    await this.page.waitForURL(`${cp.url}/overview`);
  }

  watch(p: Page): void {
    const inFlight = new Map<Request, number>();
    this.inFlight.set(p, inFlight);
    p.on('request', (request) => {
      if (request.resourceType() !== 'eventsource') inFlight.set(request, performance.now());
    });
    p.on('requestfinished', (request) => inFlight.delete(request));
    p.on('requestfailed', (request) => inFlight.delete(request));
    p.on('close', () => this.inFlight.delete(p));
    p.on('pageerror', (error) => this.problems.push(`page error: ${error.message}`));
    // a style or script the Content-Security-Policy refused is a broken page too
    p.on('console', (message) => {
      if (message.type() === 'error' && /Content Security Policy|Refused to/.test(message.text()))
        this.problems.push(`console: ${message.text()}`);
    });
  }

  /** For `afterEach`: what broke in a page during the test, emptied. */
  takeProblems(): string[] {
    return this.problems.splice(0);
  }

  /**
   * axe-core on the page once it has settled: no serious or critical violation.
   * A page that fails is photographed to look at (`test-results/console/`), and
   * every checked page is with AILERON_TEST_SCREENSHOTS=1.
   */
  async check(p: Page, name: string): Promise<void> {
    // settled: none of the page's requests on their way (it may still be drawing what one brought) but those a
    // server holds (a change waiting on what the test holds back), and a dialog still fading in or out is half
    // transparent: axe would see its contrast fail, or a menu without items
    const inFlight = this.inFlight.get(p);
    // a page nobody watched: no quiet network but half a second of it after its load tells
    if (inFlight === undefined) await p.waitForLoadState('networkidle');
    const loading = () => [...(inFlight?.values() ?? [])].some((began) => performance.now() - began < HELD_MS);
    await expect.poll(async () => !loading() && (await p.evaluate(SETTLED))).toBe(true);
    // evaluated through the debugging protocol: the page's CSP (rightly) refuses injected scripts; once a document
    if (!(await p.evaluate(`typeof axe !== 'undefined'`))) await p.evaluate(`${AXE}\n;undefined`);
    const violations = (await p.evaluate(
      `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`,
    )) as string[];
    if (violations.length > 0 || process.env.AILERON_TEST_SCREENSHOTS === '1')
      await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
    expect(violations, name).toEqual([]);
  }

  /** Presses Tab (Shift+Tab with `backwards`) until `target` has the focus, as a person without a mouse reaches a control. */
  async tabTo(p: Page, target: Locator, { presses = 80, backwards = false } = {}): Promise<void> {
    // the element, found once: a locator is looked up again on each use, and a role's walks the accessible names of
    // the whole page (console-keyboard pressed Tab 606 times); found again only if the page replaced it
    let element = await target.elementHandle();
    for (let i = 0; i < presses; i++) {
      await p.keyboard.press(backwards ? 'Shift+Tab' : 'Tab');
      let reached = await element.evaluate((el) => (el.isConnected ? el === el.ownerDocument.activeElement : null));
      if (reached === null) {
        await element.dispose();
        element = await target.elementHandle();
        reached = await element.evaluate((el) => el === el.ownerDocument.activeElement);
      }
      if (reached) return void (await element.dispose());
    }
    await element.dispose();
    throw new Error(`${backwards ? 'Shift+Tab' : 'Tab'} never reached ${String(target)}`);
  }

  /** A Mantine Select: open it, pick the option. */
  async pick(p: Page, label: string, option: string): Promise<void> {
    await p.getByRole('combobox', { name: label, exact: true }).click();
    await p.getByRole('option', { name: option, exact: true }).click();
  }

  async close(): Promise<void> {
    await this.browser.close();
  }
}
