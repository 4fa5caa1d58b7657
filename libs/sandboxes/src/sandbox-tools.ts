import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Principal, WorkspaceScope } from '@aileron/auth';
import { describeIssues, DomainError, fieldIssues, toolError } from '@aileron/errors';
import { compilePathGlob, GlobSyntaxError, matchingPaths, MAX_GLOB_LENGTH } from '@aileron/glob';
import { type CommandRestrictions, RunnerError } from './drivers/driver';
import { PatchError, planPatch } from './domain/unified-patch';
import { sandboxSlug } from './domain/slug';
import { SANDBOX_WORKDIR } from './runner-protocol';
import type { SandboxRecord } from './sandboxes.repository';
import { authorOf, SandboxesService } from './sandboxes.service';

/** Who calls, for one MCP session of the sandbox server. */
export interface ToolCaller {
  scope: WorkspaceScope;
  caller: Principal;
}

/** What one MCP session of the sandbox server has been told. */
export interface SessionState {
  /** from the last `codex/sandbox-state/update`: applied to this MCP session's later `bash` calls; null: the sandbox's own */
  restrictions: CommandRestrictions | null;
}

/** Asks the person at the MCP client (an elicitation); absent when the client cannot be asked. */
export type Elicit = (message: string) => Promise<'accept' | 'decline' | 'cancel'>;

/**
 * Shows the person at the MCP client a page to open (a URL-mode
 * elicitation, which the client opens outside itself): where the answer is
 * given is the page, never the client's reply. `done` says it is over
 * (`decided`: the page's work is done, `notifications/elicitation/complete`).
 */
export type OpenPage = (page: { message: string; url: string; id: string }) => { done(decided: boolean): void };

/** What the MCP client can put before the person there, as it declared: a question (form) or a page (url). */
export interface ClientAsks {
  elicit?: Elicit;
  openPage?: OpenPage;
}

/** Tells the MCP client that the call is still under way (a progress notification); absent when the client asked for none. */
export type Progress = (message: string) => void;

/** A call that may be held (for a person's approval): the client going away ends it, and it hears that it waits. */
export interface HeldCall {
  signal: AbortSignal;
  progress?: Progress;
}

/** Decides a `bash` command before it runs (shell rules); null: it runs. */
export type ShellGate = (
  who: ToolCaller,
  sandbox: SandboxRecord,
  command: string,
  workdir: string,
  wait: HeldCall,
  asks: ClientAsks,
) => Promise<{ stderr: string; exitCode: number } | null>;

const sandbox = z
  .string()
  .min(1)
  .max(200)
  .describe('the sandbox to work in, by name (slugified: "My Box" is "my-box")');
const path = z.string().min(1).max(4096);

function refuseBadGlob(pattern: string, ctx: z.RefinementCtx): void {
  try {
    compilePathGlob(pattern);
  } catch (error) {
    if (!(error instanceof GlobSyntaxError)) throw error;
    ctx.addIssue({ code: 'custom', message: error.message });
  }
}

export function toolArgs(bashTimeouts: { defaultMs: number; maxMs: number }) {
  return {
    read: z
      .object({
        sandbox,
        path: path.describe(`the file; relative paths are inside ${SANDBOX_WORKDIR}`),
        offset: z.number().int().min(0).optional().describe('the first line to return, 0-based'),
        limit: z.number().int().min(1).optional().describe('at most this many lines'),
      })
      .strict(),
    write: z
      .object({
        sandbox,
        path: path.describe('the file to replace or create (with its directories)'),
        content: z.string().describe('the whole new content'),
      })
      .strict(),
    patch: z
      .object({
        sandbox,
        path: path.describe('the file the diff is for'),
        diff: z
          .string()
          .min(1)
          .describe('a unified diff of that one file; "--- /dev/null" creates it, "+++ /dev/null" deletes it'),
      })
      .strict(),
    bash: z
      .object({
        sandbox,
        command: z.string().min(1).max(100_000).describe('run by bash -c'),
        workdir: path.optional().describe(`where it runs (default ${SANDBOX_WORKDIR})`),
        timeout: z
          .number()
          .int()
          .min(1)
          .max(bashTimeouts.maxMs)
          .optional()
          .describe(
            `milliseconds (default ${bashTimeouts.defaultMs}, at most ${bashTimeouts.maxMs}); then it is killed with everything it started`,
          ),
      })
      .strict(),
    ls: z
      .object({
        sandbox,
        path: path.optional().describe(`a directory (default ${SANDBOX_WORKDIR})`),
        recursive: z.boolean().optional(),
      })
      .strict(),
    glob: z
      .object({
        sandbox,
        pattern: z
          .string()
          .min(1)
          .max(MAX_GLOB_LENGTH)
          .superRefine(refuseBadGlob)
          .describe('e.g. "**/*.test.js"; `*` `?` `[a-z]` within a path segment, `**` across them, `{a,b}` either'),
        path: path.optional().describe(`where to search (default ${SANDBOX_WORKDIR})`),
      })
      .strict(),
    grep: z
      .object({
        sandbox,
        pattern: z.string().min(1).max(1000).describe('an extended regular expression'),
        path: path.describe('a file or directory to search'),
        include: z.string().max(200).optional().describe('only files whose name matches this glob, e.g. "*.ts"'),
      })
      .strict(),
  };
}

type Args = ReturnType<typeof toolArgs>;

const DESCRIPTIONS: Record<keyof Args, { title: string; description: string; readOnly: boolean }> = {
  read: {
    title: 'Read a file',
    description: 'Read a text file in a sandbox, whole or a slice of lines (offset is 0-based).',
    readOnly: true,
  },
  write: {
    title: 'Write a file',
    description:
      'Replace a file in a sandbox with new content, creating it and its directories if need be. Each change is kept as a snapshot commit.',
    readOnly: false,
  },
  patch: {
    title: 'Apply a unified diff',
    description:
      'Apply a unified diff to one file in a sandbox: it may create, change or delete the file. A diff that does not apply changes nothing and says why; one already applied is reported.',
    readOnly: false,
  },
  bash: {
    title: 'Run a shell command',
    description:
      "Run a command with bash in a sandbox. Answers stdout, stderr and exitCode; a non-zero exit is a result, not an error. The workspace's shell rules may forbid a command or ask a person first.",
    readOnly: false,
  },
  ls: {
    title: 'List a directory',
    description: 'List a directory in a sandbox (recursively if asked). Symbolic links are listed, not followed.',
    readOnly: true,
  },
  glob: {
    title: 'Find files by pattern',
    description: 'Find files in a sandbox whose path (relative to `path`) matches a glob such as "**/*.ts".',
    readOnly: true,
  },
  grep: {
    title: 'Search file contents',
    description: 'Search files in a sandbox for an extended regular expression; answers path:line: text.',
    readOnly: true,
  },
};

export function toolList(args: Args): Tool[] {
  return (Object.keys(args) as (keyof Args)[]).map((name) => {
    const { $schema: _ignored, ...inputSchema } = z.toJSONSchema(args[name], { io: 'input' }) as Record<
      string,
      unknown
    >;
    const { title, description, readOnly } = DESCRIPTIONS[name];
    return {
      name,
      title,
      description,
      inputSchema: inputSchema as Tool['inputSchema'],
      annotations: {
        readOnlyHint: readOnly,
        destructiveHint: !readOnly,
        idempotentHint: readOnly,
        openWorldHint: false,
      },
    };
  });
}

function text(body: string, structured?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: body }], ...(structured ? { structuredContent: structured } : {}) };
}

/** The seven tools on a sandbox, as one MCP session's caller uses them. */
export class SandboxTools {
  readonly args: Args;

  constructor(
    private readonly sandboxes: SandboxesService,
    bashTimeouts: { defaultMs: number; maxMs: number },
    private readonly shellGate: ShellGate,
    private readonly restrictionsFor: (who: ToolCaller) => CommandRestrictions | null = () => null,
  ) {
    this.args = toolArgs(bashTimeouts);
    this.bashDefaultMs = bashTimeouts.defaultMs;
  }

  private readonly bashDefaultMs: number;

  list(): Tool[] {
    return toolList(this.args);
  }

  /** Runs a tool; whatever goes wrong becomes a tool error in words the agent can act on. */
  async call(
    who: ToolCaller,
    name: string,
    raw: unknown,
    signal: AbortSignal,
    asks: ClientAsks = {},
    progress?: Progress,
  ): Promise<CallToolResult> {
    if (!Object.hasOwn(this.args, name)) return toolError('UNKNOWN_TOOL', `Unknown tool: ${name}`);
    const parsed = this.args[name as keyof Args].safeParse(raw ?? {});
    if (!parsed.success)
      return toolError('INVALID_ARGUMENTS', describeIssues(fieldIssues('arguments', parsed.error.issues)));
    const args = parsed.data as { sandbox: string };
    const slug = sandboxSlug(args.sandbox);
    const grant = who.caller.agentSession;
    if (grant && !grant.allowsSandbox(slug))
      return toolError(
        'CAPABILITY_REQUIRED',
        `This session token does not reach sandbox "${slug}" (it needs the sandbox:use capability and no sandbox caveat naming another)`,
      );
    const target = await this.sandboxes.find(who.scope, args.sandbox);
    if (!target) return toolError('SANDBOX_NOT_FOUND', `sandbox not found: ${slug}`);
    try {
      return await this.run(who, target, name as keyof Args, parsed.data, signal, asks, progress);
    } catch (error) {
      if (error instanceof RunnerError) return toolError(error.failure.code, error.failure.message);
      if (error instanceof PatchError) return toolError(error.code, `${error.message}; nothing was changed`);
      if (error instanceof DomainError) return toolError(error.code, error.detail);
      throw error;
    }
  }

  private async run(
    who: ToolCaller,
    target: SandboxRecord,
    name: keyof Args,
    data: unknown,
    signal: AbortSignal,
    asks: ClientAsks,
    progress?: Progress,
  ): Promise<CallToolResult> {
    const author = authorOf(who.caller);
    switch (name) {
      case 'read': {
        const a = data as z.infer<Args['read']>;
        const runner = await this.sandboxes.runner(who.scope, target);
        const read = await runner.call({ op: 'read', path: a.path, offset: a.offset ?? 0, limit: a.limit ?? null });
        return text(read.content, { lines: read.lines, total_lines: read.totalLines });
      }
      case 'write': {
        const a = data as z.infer<Args['write']>;
        const written = await this.sandboxes.change(
          who.scope,
          target,
          (runner) => runner.call({ op: 'write', path: a.path, content: a.content }),
          () => ({ trigger: 'write', subject: a.path, author }),
        );
        return text(`${written.created ? 'Created' : 'Wrote'} ${a.path} (${written.bytes} bytes)`);
      }
      case 'patch': {
        const a = data as z.infer<Args['patch']>;
        const outcome = await this.sandboxes.change(
          who.scope,
          target,
          async (runner) => {
            const current = await runner.call({ op: 'readText', path: a.path });
            const plan = planPatch(a.path, a.diff, current.content);
            if (plan.kind === 'delete') await runner.call({ op: 'remove', path: a.path });
            else if (plan.kind !== 'already-applied')
              await runner.call({ op: 'write', path: a.path, content: plan.content });
            return plan;
          },
          (plan) => (plan.kind === 'already-applied' ? null : { trigger: 'patch', subject: a.path, author }),
        );
        if (outcome.kind === 'already-applied')
          return text(`The diff is already applied to ${a.path}: nothing changed`, {
            applied: false,
            already_applied: true,
          });
        const verb = { create: 'Created', modify: 'Patched', delete: 'Deleted' }[outcome.kind];
        return text(`${verb} ${a.path} (+${outcome.added} -${outcome.removed})`, {
          applied: true,
          already_applied: false,
          added: outcome.added,
          removed: outcome.removed,
        });
      }
      case 'bash': {
        const a = data as z.infer<Args['bash']>;
        const workdir = a.workdir ?? SANDBOX_WORKDIR;
        const refused = await this.shellGate(who, target, a.command, workdir, { signal, progress }, asks);
        if (refused)
          return text(JSON.stringify({ stdout: '', stderr: refused.stderr, exitCode: refused.exitCode }), {
            stdout: '',
            stderr: refused.stderr,
            exitCode: refused.exitCode,
          });
        const exec = {
          op: 'exec' as const,
          command: a.command,
          workdir,
          timeoutMs: a.timeout ?? this.bashDefaultMs,
          limits: target.limits,
        };
        const restrictions = this.restrictionsFor(who);
        const ran = await this.sandboxes.change(
          who.scope,
          target,
          (runner) =>
            restrictions
              ? this.sandboxes.execRestricted(who.scope, target, runner, exec, restrictions)
              : runner.call(exec),
          () => ({ trigger: 'bash', subject: a.command, author }),
        );
        const result = { stdout: ran.stdout, stderr: ran.stderr, exitCode: ran.exitCode };
        return text(JSON.stringify(result), result);
      }
      case 'ls': {
        const a = data as z.infer<Args['ls']>;
        const runner = await this.sandboxes.runner(who.scope, target);
        const listed = await runner.call({
          op: 'ls',
          path: a.path ?? SANDBOX_WORKDIR,
          recursive: a.recursive ?? false,
        });
        const lines = listed.entries.map((e) =>
          e.type === 'dir' ? `${e.path}/` : e.type === 'symlink' ? `${e.path}@` : `${e.path}  ${e.size}`,
        );
        return text(lines.join('\n') + (listed.truncated ? '\n… (more entries not shown)' : ''), {
          entries: listed.entries,
          truncated: listed.truncated,
        });
      }
      case 'glob': {
        const a = data as z.infer<Args['glob']>;
        // RE2, not a backtracking RegExp: the pattern is the agent's, and this is the event loop every tenant shares
        const glob = compilePathGlob(a.pattern);
        const runner = await this.sandboxes.runner(who.scope, target);
        const walked = await runner.call({ op: 'walk', path: a.path ?? SANDBOX_WORKDIR });
        const found = (await matchingPaths(glob, walked.files, signal)) ?? [];
        return text(
          found.join('\n') +
            (walked.truncated ? '\n… (the walk stopped early: more files may match; search a narrower path)' : ''),
          { files: found, truncated: walked.truncated },
        );
      }
      case 'grep': {
        const a = data as z.infer<Args['grep']>;
        const runner = await this.sandboxes.runner(who.scope, target);
        const found = await runner.call({ op: 'grep', pattern: a.pattern, path: a.path, include: a.include ?? null });
        const lines = found.matches.map((m) => `${m.path}:${m.line}: ${m.text}`);
        return text(lines.join('\n') + (found.truncated ? '\n… (more matches not shown)' : ''), {
          matches: found.matches,
          truncated: found.truncated,
        });
      }
    }
  }
}
