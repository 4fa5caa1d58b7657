import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { ApiClient, ApiOptions } from './api-client';
import { withApiOptions } from './api-commands';
import { CliError } from './cli-error';
import { note, out, printJson, printTable, when } from './output';

type WorkspaceOption = ApiOptions & { workspace: string };

interface SecretView {
  path: string;
  ref: string;
  version: number;
  versions: number[];
  updated_at: string;
  updated_by: string | null;
  last_read_at: string | null;
  last_read_by: string | null;
  deliver_to_gateways: boolean;
}

interface VerifyView {
  ok: boolean;
  events: number;
  checkpoints: number;
  first_bad?: { seq: number; id: string | null; reason: string };
}

function ws(options: WorkspaceOption): string {
  return `/v1/workspaces/${encodeURIComponent(options.workspace)}`;
}

function secretPath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

function onOff(value: string): boolean {
  if (value === 'on') return true;
  if (value === 'off') return false;
  throw new InvalidArgumentError('must be on or off.');
}

function deliveryNote(secret: SecretView): string {
  return secret.deliver_to_gateways ? '; gateways may receive it' : '; gateways may not receive it';
}

export function addSecretsCommand(parent: Command): void {
  const secrets = parent
    .command('secrets')
    .description("write, list and delete a workspace's secrets (values are never shown)");

  withApiOptions(
    secrets
      .command('put')
      .description(
        'write a new version of a secret; the value comes from --from-file or stdin, never the command line (shell history)',
      )
      .argument('<path>', 'e.g. github/token')
      .requiredOption('--workspace <slug>', 'the workspace')
      .option('--from-file <file>', 'read the value from a file instead of stdin')
      .option(
        '--deliver-to-gateways',
        'gateways may receive the value for their local servers (each read audited); left out, a new secret is not deliverable and an existing one keeps its setting',
      )
      .option('--no-deliver-to-gateways', 'gateways may not receive the value'),
  ).action(async (path: string, options: WorkspaceOption & { fromFile?: string; deliverToGateways?: boolean }) => {
    let value: string;
    try {
      value = readFileSync(options.fromFile ?? 0, 'utf8').replace(/\r?\n$/, '');
    } catch (error) {
      throw new CliError(`cannot read the value: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`);
    }
    if (value === '') throw new CliError('the value is empty: pipe it on stdin or pass --from-file');
    const written = await ApiClient.from(options).put<SecretView>(`${ws(options)}/secrets/${secretPath(path)}`, {
      value,
      ...(options.deliverToGateways === undefined ? {} : { deliver_to_gateways: options.deliverToGateways }),
    });
    if (options.json) return printJson(written);
    out(`${written.ref} version ${written.version} written${deliveryNote(written)}`);
  });

  withApiOptions(
    secrets
      .command('delivery')
      .description(
        'say whether gateways may receive a secret for their local servers, without writing a new value (audited as secret.delivery_changed)',
      )
      .argument('<path>', 'e.g. github/token')
      .argument('<on|off>', 'on: gateways may receive it; off: they may not', onOff)
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (path: string, deliver: boolean, options: WorkspaceOption) => {
    const changed = await ApiClient.from(options).patch<SecretView>(`${ws(options)}/secrets/${secretPath(path)}`, {
      deliver_to_gateways: deliver,
    });
    if (options.json) return printJson(changed);
    out(`${changed.ref}${deliveryNote(changed)}`);
  });

  withApiOptions(
    secrets
      .command('list')
      .description('secret paths with versions and last read')
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (options: WorkspaceOption) => {
    const list = await ApiClient.from(options).all<SecretView>(`${ws(options)}/secrets`);
    if (options.json) return printJson({ secrets: list });
    if (list.length === 0) return out('no secrets');
    printTable(
      ['path', 'version', 'kept', 'gateways', 'updated', 'by', 'last read', 'by'],
      list.map((s) => [
        s.path,
        String(s.version),
        s.versions.join(','),
        s.deliver_to_gateways ? 'yes' : 'no',
        when(s.updated_at),
        s.updated_by ?? '-',
        when(s.last_read_at),
        s.last_read_by ?? '-',
      ]),
    );
  });

  withApiOptions(
    secrets
      .command('delete')
      .description('delete a secret and all its versions')
      .argument('<path>', 'e.g. github/token')
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (path: string, options: WorkspaceOption) => {
    await ApiClient.from(options).delete(`${ws(options)}/secrets/${secretPath(path)}`);
    if (options.json) return printJson({ deleted: path });
    out(`deleted ${path}`);
  });

  withApiOptions(
    secrets
      .command('rotate-key')
      .description("rotate the workspace's vault key (re-wraps every data key; values untouched)")
      .requiredOption('--workspace <slug>', 'the workspace'),
  ).action(async (options: WorkspaceOption) => {
    const rotated = await ApiClient.from(options).post<{ key_version: number; rewrapped: number }>(
      `${ws(options)}/vault/rotate`,
      {},
    );
    if (options.json) return printJson(rotated);
    out(`vault key version ${rotated.key_version}; ${rotated.rewrapped} data key(s) re-wrapped`);
  });
}

export function addAuditCommand(parent: Command): void {
  const audit = parent.command('audit').description('verify and export the tamper-evident audit log');

  withApiOptions(
    audit
      .command('verify')
      .description('check the hash chain and signed checkpoints; exit code 1 names the first bad record')
      .option('--workspace <slug>', "a workspace's chain (default: the organisation's own)"),
  ).action(async (options: ApiOptions & { workspace?: string }) => {
    const path = options.workspace ? `${ws(options as WorkspaceOption)}/audit/verify` : '/v1/audit/verify';
    const result = await ApiClient.from(options).get<VerifyView>(path);
    if (options.json) printJson(result);
    else if (result.ok) out(`ok: ${result.events} record(s), ${result.checkpoints} signed checkpoint(s)`);
    else
      out(
        `TAMPERED at record ${result.first_bad!.seq}${result.first_bad!.id ? ` (${result.first_bad!.id})` : ''}: ${result.first_bad!.reason}`,
      );
    if (!result.ok) process.exitCode = 1;
  });

  withApiOptions(
    audit
      .command('export')
      .description('write the log to stdout in chain order')
      .option('--workspace <slug>', "a workspace's chain (default: the organisation's own)")
      .option('--format <format>', 'jsonl or csv', 'jsonl')
      .option('--from <iso>', 'occurred at or after')
      .option('--to <iso>', 'occurred before'),
  ).action(async (options: ApiOptions & { workspace?: string; format: string; from?: string; to?: string }) => {
    if (!['jsonl', 'csv'].includes(options.format)) throw new CliError('--format must be jsonl or csv');
    const query = new URLSearchParams({
      format: options.format,
      ...(options.from ? { from: options.from } : {}),
      ...(options.to ? { to: options.to } : {}),
    });
    const base = options.workspace ? `${ws(options as WorkspaceOption)}/audit/export` : '/v1/audit/export';
    process.stdout.write(await ApiClient.from(options).getText(`${base}?${query}`));
    note(`exported ${options.workspace ? `workspace ${options.workspace}` : 'the organisation'} audit log`);
  });
}
