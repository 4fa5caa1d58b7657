import { Command } from 'commander';
import { addTokensCommand, addWorkspacesCommand } from './api-commands';
import { addApprovalsCommand } from './approvals-commands';
import { addConnectionsCommand } from './connections-commands';
import { addSessionsCommand } from './sessions-commands';
import { addGatewaysCommand, addPolicyCommand } from './gateway-commands';
import { addAuditCommand, addSecretsCommand } from './vault-audit-commands';
import { oneLine } from './cli-error';

const NAME = 'aileron-cp';

// The database commands load Nest, Prisma and the schema engine; required on
// use so that `tokens list` and friends start in a fraction of the time.
function program(): Command {
  const root = new Command(NAME)
    .description(
      'Administer an Aileron control plane: run it, migrate and bootstrap its database, manage tokens and workspaces.',
    )
    .showHelpAfterError(false)
    .configureOutput({
      // commander's own usage errors follow the same one-line format as ours
      outputError: (message, write) => write(`${NAME}: ${oneLine(message.replace(/^error: /, ''))}\n`),
    });

  root
    .command('start')
    .description('run the control plane, exactly as `npm start` does (configured through the environment)')
    .action(() => {
      const { runStart } = require('./start') as typeof import('./start');
      runStart();
    });

  root
    .command('migrate')
    .description(
      'apply pending database migrations to DATABASE_URL, or to the embedded PGlite database in AILERON_DATA_DIR',
    )
    .option('--verbose', 'show what the migrator does, on stderr')
    .action(async (options: { verbose?: boolean }) => {
      const { runMigrate } = require('./migrate') as typeof import('./migrate');
      await runMigrate(options);
    });

  root
    .command('bootstrap')
    .description('server mode: create the first organisation and print its owner token (only the token goes to stdout)')
    .option('--org <slug>', 'slug of the organisation', 'default')
    .option('--name <name>', 'its display name (default: "Default" for the slug default, else the slug)')
    .option('--verbose', 'show what the migrator and Nest do, on stderr')
    .action(async (options: { org: string; name?: string; verbose?: boolean }) => {
      const { runBootstrap } = require('./bootstrap') as typeof import('./bootstrap');
      await runBootstrap(options);
    });

  root
    .command('mcp')
    .description(
      'run aileron-mcp, the stdio MCP server for a sandboxed agent (AILERON_URL, AILERON_TOKEN, AILERON_WORKSPACE; `mcp --help`)',
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument('[options...]', 'passed to aileron-mcp: --version or --help')
    .action(async (args: string[]) => {
      const { runMcp } = require('./mcp') as typeof import('./mcp');
      // serving ends when the agent closes stdin; whatever the upstream connection left open must not keep the process
      process.exit(await runMcp(args));
    });

  addTokensCommand(root);
  addWorkspacesCommand(root);
  addGatewaysCommand(root);
  addPolicyCommand(root);
  addSecretsCommand(root);
  addAuditCommand(root);
  addApprovalsCommand(root);
  addSessionsCommand(root);
  addConnectionsCommand(root);
  return root;
}

function fail(error: unknown): void {
  // The message only: every failure a user can cause is a CliError or a
  // library error already worded for them, and a stack trace would bury it.
  const message = oneLine(error instanceof Error ? error.message : String(error));
  process.stderr.write(`${NAME}: ${message || 'failed'}\n`);
  process.exitCode = 1;
}

program().parseAsync(process.argv).catch(fail);
