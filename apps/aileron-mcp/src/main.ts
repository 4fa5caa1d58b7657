import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createServer } from './server';
import { readSettings, Settings, SettingsError } from './settings';
import { version } from './version';

const NAME = 'aileron-mcp';
/** EX_CONFIG, as the control plane exits on a bad setting */
const EXIT_CONFIG = 78;
const EXIT_USAGE = 2;

const USAGE = `Usage: ${NAME} [--version | --help]

The Aileron MCP server for a sandboxed agent, on stdio: the workspace's tools
(server__tool) through the control plane's policy and approvals, plus
approval_status and message_user.

Environment:
  AILERON_URL         the control plane, e.g. https://aileron.example.com
  AILERON_TOKEN       the session caveat token (ail_ct_…)
  AILERON_WORKSPACE   the slug of the session's workspace
  AILERON_SESSION_ID  the session id (optional: the token names it)
`;

// stdout is the protocol: everything for people goes to stderr
function say(line: string): void {
  process.stderr.write(`${NAME}: ${line}\n`);
}

/**
 * Runs aileron-mcp with these arguments (without node and the script).
 * Resolves with an exit code for the one-shot forms; serving resolves when
 * the agent closes stdin.
 */
export async function run(args: string[]): Promise<number> {
  if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  if (args.length === 1 && (args[0] === '--help' || args[0] === '-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.length > 0) {
    say(`unexpected argument ${JSON.stringify(args[0])}; it is configured through its environment (see --help)`);
    return EXIT_USAGE;
  }
  let settings: Settings;
  try {
    settings = readSettings(process.env);
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    say(error.message);
    return EXIT_CONFIG;
  }
  const { server, serve, close } = createServer(settings, version(), say);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    server.onclose = resolve;
    // the agent going away closes stdin; the SDK's stdio transport does not notice that by itself
    const end = (): void => void transport.close();
    process.stdin.once('end', end);
    process.once('SIGTERM', end);
    process.once('SIGINT', end);
  });
  await serve(transport);
  await closed;
  await close();
  return 0;
}

if (require.main === module) {
  run(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      say(error instanceof Error ? error.message : String(error));
      process.exit(1);
    },
  );
}
