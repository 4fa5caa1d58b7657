import { z } from 'zod';
import { slug } from '@aileron/auth';
import { pageQuery, pageView } from '@aileron/http';
import { isBrowsablePath } from './domain/tree-listing';
import type { SandboxRecord, SnapshotRecord } from './sandboxes.repository';

export const wsParams = z.object({ ws: slug });
export const sandboxParams = z.object({ ws: slug, name: z.string().min(1).max(200) });
export const snapshotParams = z.object({ ws: slug, name: z.string().min(1).max(200), sha: z.string().min(1).max(64) });

export const createBody = z
  .object({
    name: z.string().min(1).max(200).describe('slugified: lower case, [a-z0-9-], at most 63 characters'),
    source: z
      .enum(['empty', 'upload'])
      .default('empty')
      .describe('`upload`: the files come with PUT …/source next; `empty`: an empty repository'),
    network: z
      .enum(['none', 'egress'])
      .default('none')
      .describe(
        '`egress`: commands may reach the public internet (never the host or private, link-local or metadata addresses); only owners and admins, where AILERON_SANDBOX_EGRESS allows it. `none`: no network at all',
      ),
    limits: z
      .object({
        cpu_seconds: z.number().int().min(1).max(86_400).optional().describe('CPU time of one process of a command'),
        memory_mb: z
          .number()
          .int()
          .min(64)
          .max(65_536)
          .optional()
          .describe(
            'memory one process of a command may write to (its data limit: heap and private mappings, not what it only reserves); locally the sandbox as a whole, every process and its /tmp and home together, gets this plus both tmpfs sizes and 256 MiB for the runner',
          ),
        pids: z
          .number()
          .int()
          .min(8)
          .max(65_536)
          .optional()
          .describe('processes and threads the sandbox may have at once (locally its runner’s dozen included)'),
      })
      .strict()
      .default({}),
  })
  .strict();

export const sandboxView = z.object({
  name: z.string(),
  workspace: z.string(),
  network: z.enum(['none', 'egress']),
  limits: z.object({
    cpu_seconds: z.number().optional(),
    memory_mb: z.number().optional(),
    pids: z.number().optional(),
  }),
  source: z.enum(['empty', 'git-bundle', 'tar.gz']),
  workdir: z.literal('/src'),
  created_by: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
});

export function toSandboxView(sandbox: SandboxRecord): z.infer<typeof sandboxView> {
  const { cpuSeconds, memoryMb, pids } = sandbox.limits;
  return {
    name: sandbox.name,
    workspace: sandbox.workspaceSlug,
    network: sandbox.network,
    limits: {
      ...(cpuSeconds ? { cpu_seconds: cpuSeconds } : {}),
      ...(memoryMb ? { memory_mb: memoryMb } : {}),
      ...(pids ? { pids } : {}),
    },
    source: sandbox.source,
    workdir: '/src',
    created_by: sandbox.createdBy,
    created_at: sandbox.createdAt.toISOString(),
    last_used_at: sandbox.lastUsedAt?.toISOString() ?? null,
  };
}

export const snapshotView = z.object({
  sha: z.string(),
  trigger: z.string(),
  message: z.string(),
  files: z.array(z.object({ path: z.string(), status: z.string() })),
  session: z.string().nullable(),
  author: z.string(),
  created_at: z.string(),
});

export function toSnapshotView(snapshot: SnapshotRecord): z.infer<typeof snapshotView> {
  return {
    sha: snapshot.sha,
    trigger: snapshot.trigger,
    message: snapshot.message,
    files: snapshot.files,
    session: snapshot.agentSessionId,
    author: snapshot.author,
    created_at: snapshot.createdAt.toISOString(),
  };
}

export const snapshotsQuery = pageQuery();

const shellRule = z
  .object({
    program: z
      .string()
      .min(1)
      .max(4096)
      .describe('a program name (resolved in the sandbox as execve would) or an absolute path'),
    args: z
      .array(z.union([z.string().max(4096), z.array(z.string().max(4096)).min(1).max(64)]))
      .max(64)
      .default([])
      .describe('an argument prefix; a list in it: alternatives'),
    decision: z.enum(['allow', 'prompt', 'forbidden']),
    justification: z.string().min(1).max(1000).optional(),
  })
  .strict();

export const shellRulesBody = z
  .object({
    rules: z.array(shellRule).max(1000).optional(),
    codex_rules: z
      .string()
      .max(1_000_000)
      .optional()
      .describe('a Codex .rules file (prefix_rule(...) calls), added after `rules`'),
    elicitation: z
      .boolean()
      .optional()
      .describe('ask an MCP client that supports elicitation instead of making an approval request'),
  })
  .strict();

export const shellRulesView = z.object({
  rules: z.array(
    z.object({
      program: z.string(),
      args: z.array(z.union([z.string(), z.array(z.string())])),
      decision: z.string(),
      justification: z.string().optional(),
      paths: z
        .array(z.string())
        .optional()
        .describe("the absolute paths that may stand for the program's name (a .rules file's host_executable)"),
      source: z.string().optional(),
    }),
  ),
  elicitation: z.boolean(),
  version: z.number(),
  updated_by: z.string().nullable(),
});

const browsedPath = z
  .string()
  .max(4096)
  .refine(isBrowsablePath, 'must be a relative path without empty, "." or ".." parts')
  .describe('relative to /src; empty: the root');
const snapshotAt = z
  .string()
  .max(64)
  .optional()
  .describe("one of the sandbox's snapshot commits; by default the newest");

export const filesQuery = pageQuery().extend({ path: browsedPath.default(''), at: snapshotAt });
export const fileQuery = z.object({ path: browsedPath.refine((p) => p !== '', 'names a file'), at: snapshotAt });

const entryKind = z.enum(['directory', 'file', 'executable', 'symlink', 'submodule']);

export const fileEntryView = z.object({
  name: z.string(),
  path: z.string().describe('relative to /src'),
  kind: entryKind,
  size: z.number().nullable().describe("bytes of a file or of a link's target; null for a directory"),
});

export const filesPage = pageView(fileEntryView).extend({
  commit: z.string().nullable().describe('the snapshot commit listed; null while the sandbox has none'),
});

export const fileView = z.object({
  commit: z.string(),
  path: z.string(),
  kind: entryKind,
  size: z.number(),
  text: z.string().nullable().describe("the file's text (a link's target); null when binary or too large"),
  binary: z.boolean(),
  too_large: z.boolean().describe('over 1 MiB: not shown; the bundle has it'),
});

export const checkBody = z
  .object({
    command: z.string().min(1).max(100_000).describe('a command line as the bash tool would get it'),
    sandbox: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('resolve its programs in this sandbox, as the bash tool does; without it they are compared by name'),
    workdir: z.string().min(1).max(4096).default('/src').describe('where the line would run (with `sandbox`)'),
  })
  .strict();

const ruleView = shellRulesView.shape.rules.element;

export const checkView = z.object({
  decision: z.enum(['allow', 'prompt', 'forbidden']),
  rule: ruleView.nullable().describe('the rule that decided; null when none did'),
  reason: z.string().describe('what the bash tool would say'),
  command: z.array(z.string()).describe('the command of the line that decided, as words'),
  resolved_in: z.string().nullable().describe('the sandbox the programs were resolved in; null: by name only'),
});
