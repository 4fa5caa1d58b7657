import 'reflect-metadata';
import { loadConfigOrExit } from '@aileron/config';
import { DataDirLockedError } from '@aileron/database';
import { startControlPlane } from './control-plane';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  let controlPlane;
  try {
    controlPlane = await startControlPlane(config);
  } catch (error) {
    if (error instanceof DataDirLockedError) {
      process.stderr.write(`aileron: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const { bootstrap, url, signInLink } = controlPlane;
  const lines = [`aileron control plane (${config.mode} mode) listening on ${url}`, `web console: ${url}/`];
  if (bootstrap) {
    lines.push(
      bootstrap.reissued
        ? `owner API token written to ${bootstrap.tokenPath} (mode 0600)`
        : `owner API token: ${bootstrap.tokenPath}`,
      `try: curl -H "Authorization: Bearer $(cat ${bootstrap.tokenPath})" ${url}/v1/me`,
    );
  }
  // works once, for ten minutes: a new one with POST /v1/auth/sign-in-links and the owner token
  if (signInLink) lines.push(`sign in to the console (once, within 10 minutes): ${signInLink}`);
  process.stdout.write(lines.map((l) => `» ${l}\n`).join(''));

  const stop = (signal: string): void => {
    process.stdout.write(`» ${signal}: shutting down\n`);
    // close() itself stops waiting after twice the grace (./shutdown.ts): this is for a close that cannot even do that
    const force = setTimeout(() => process.exit(1), (2 * config.shutdownGraceSeconds + 5) * 1000);
    force.unref();
    controlPlane.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  process.stderr.write(`aileron: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
