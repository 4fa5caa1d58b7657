import { ToolNameTable } from '@aileron/catalog';

/**
 * How `/mcp/{ws}` names what several servers offer behind one endpoint.
 * Tools and prompts: `server__name`, shortened to 64 characters by the
 * catalog's rules. Resource URIs and templates: `server+<original URI>` —
 * still a URI (the scheme gains a `server+` part), readable, and it splits
 * back at the first "+" because server names have none.
 */
export class Namespacing {
  private tools = new ToolNameTable([]);
  private prompts = new ToolNameTable([]);

  constructor(readonly aggregate: boolean) {}

  /** Rebuilds the table from every server's list; names of pairs present before do not change. */
  setTools(pairs: { server: string; tool: string }[]): void {
    this.tools = new ToolNameTable(pairs);
  }

  setPrompts(pairs: { server: string; tool: string }[]): void {
    this.prompts = new ToolNameTable(pairs);
  }

  toolName(server: string, tool: string): string {
    return this.aggregate ? (this.tools.nameOf(server, tool) ?? `${server}__${tool}`) : tool;
  }

  /** The server and its own name for an exposed tool name; undefined when nothing has that name. */
  resolveTool(name: string, onlyServer: string): { server: string; name: string } | undefined {
    if (!this.aggregate) return { server: onlyServer, name };
    const pair = this.tools.resolve(name) ?? splitNatural(name);
    return pair ? { server: pair.server, name: pair.tool } : undefined;
  }

  promptName(server: string, prompt: string): string {
    return this.aggregate ? (this.prompts.nameOf(server, prompt) ?? `${server}__${prompt}`) : prompt;
  }

  resolvePrompt(name: string, onlyServer: string): { server: string; name: string } | undefined {
    if (!this.aggregate) return { server: onlyServer, name };
    const pair = this.prompts.resolve(name) ?? splitNatural(name);
    return pair ? { server: pair.server, name: pair.tool } : undefined;
  }

  uri(server: string, uri: string): string {
    return this.aggregate ? `${server}+${uri}` : uri;
  }

  resolveUri(uri: string, onlyServer: string): { server: string; uri: string } | undefined {
    if (!this.aggregate) return { server: onlyServer, uri };
    const plus = uri.indexOf('+');
    if (plus <= 0) return undefined;
    return { server: uri.slice(0, plus), uri: uri.slice(plus + 1) };
  }
}

/** Before a list was seen (a client calling a tool by a name it already knows). */
function splitNatural(name: string): { server: string; tool: string } | undefined {
  const at = name.indexOf('__');
  return at > 0 ? { server: name.slice(0, at), tool: name.slice(at + 2) } : undefined;
}
