import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import type { RunnerRequest, RunnerResults } from '@aileron/sandboxes/runner-protocol';
import { Failure } from '../failure';
import { COMMAND_PATH, inSandbox } from '../sandbox-paths';
import { collector } from '../streams';

const MAX_MATCHES = 1_000;
const GREP_TIMEOUT_MS = 30_000;

export async function grep(request: Extract<RunnerRequest, { op: 'grep' }>): Promise<RunnerResults['grep']> {
  const root = inSandbox(request.path);
  await fs.stat(root);
  // GNU grep: a DFA matcher, so an agent's pattern cannot stall the runner
  const args = [
    '-rnIE',
    '--color=never',
    '--no-messages',
    ...(request.include ? [`--include=${request.include}`] : []),
    '-e',
    request.pattern,
    '--',
    root,
  ];
  return new Promise((resolveGrep, reject) => {
    const child = spawn('/usr/bin/grep', args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: COMMAND_PATH, LANG: 'C.UTF-8' },
    });
    const out = collector();
    const err = collector();
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), GREP_TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 2) return reject(new Failure('GREP_FAILED', err.text().trim() || 'grep failed'));
      const matches: RunnerResults['grep']['matches'] = [];
      for (const line of out.text().split('\n')) {
        const found = /^(.*?):(\d+):(.*)$/.exec(line);
        if (!found) continue;
        if (matches.length === MAX_MATCHES) break;
        matches.push({ path: found[1]!, line: Number(found[2]), text: found[3]!.slice(0, 2000) });
      }
      resolveGrep({ matches, truncated: out.truncated() || matches.length === MAX_MATCHES });
    });
  });
}
