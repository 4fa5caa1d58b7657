import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

/** What the `bash` tool answers. */
export interface Bash {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** A sandbox, and a client on it as an agent session whose caveat names it (unless told otherwise). */
export interface Box {
  name: string;
  client: Client;
  call(tool: string, args?: Record<string, unknown>): Promise<Record<string, unknown>>;
  bash(command: string, args?: Record<string, unknown>): Promise<Bash>;
}
