import { NamespacedServer, ToolNameTable, toolNamespaces } from '@aileron/catalog';

/**
 * How `/mcp/{ws}` names what several servers offer behind one endpoint.
 * Tools: `<namespace>__name`, the namespace being the server's `tool_prefix`
 * (else its name, and its name whenever the prefix clashes: catalog's
 * toolNamespaces), shortened to 64 characters by the catalog's rules.
 * Prompts: `server__name`, shortened alike. Resource URIs and templates:
 * `server+<original URI>` — still a URI (the scheme gains a `server+` part),
 * readable, and it splits back at the first "+" because server names have none.
 */
export class Namespacing {
  private tools = new ToolNameTable([]);
  private toolPairs: { server: string; tool: string }[] = [];
  private prompts = new ToolNameTable([]);
  /** server → the namespace of its tools */
  private namespaces = new Map<string, string>();
  /** namespace → its server */
  private owners = new Map<string, string>();

  constructor(readonly aggregate: boolean) {}

  /** The servers behind the endpoint, which decides each one's tool namespace; before any tools are set. */
  setServers(servers: readonly NamespacedServer[]): void {
    this.namespaces = toolNamespaces(servers);
    this.owners = new Map([...this.namespaces].map(([server, namespace]) => [namespace, server]));
  }

  /** Rebuilds the table from every server's list; names of pairs present before do not change. */
  setTools(pairs: { server: string; tool: string }[]): void {
    this.toolPairs = pairs;
    this.tools = new ToolNameTable(pairs.map(({ server, tool }) => ({ server: this.namespaceOf(server), tool })));
  }

  /** One more server's tools beside those listed already (a server opened after tools/list). */
  addTools(pairs: { server: string; tool: string }[]): void {
    const servers = new Set(pairs.map((p) => p.server));
    this.setTools([...this.toolPairs.filter((p) => !servers.has(p.server)), ...pairs]);
  }

  setPrompts(pairs: { server: string; tool: string }[]): void {
    this.prompts = new ToolNameTable(pairs);
  }

  toolName(server: string, tool: string): string {
    if (!this.aggregate) return tool;
    const namespace = this.namespaceOf(server);
    return this.tools.nameOf(namespace, tool) ?? `${namespace}__${tool}`;
  }

  /** The server and its own name for an exposed tool name; undefined when nothing has that name. */
  resolveTool(name: string, onlyServer: string): { server: string; name: string } | undefined {
    if (!this.aggregate) return { server: onlyServer, name };
    const pair = this.tools.resolve(name) ?? splitNatural(name);
    if (!pair) return undefined;
    const server = this.owners.get(pair.server);
    if (server !== undefined) return { server, name: pair.tool };
    // a server whose tools go by a prefix is not reached by its name: `github__x` is not `gh__x`
    return this.namespaces.has(pair.server) ? undefined : { server: pair.server, name: pair.tool };
  }

  /** For an unknown tool name that used a server's name where its tools go by a prefix: what they go by. */
  namespaceInstead(name: string): { server: string; namespace: string } | undefined {
    const server = this.aggregate ? splitNatural(name)?.server : undefined;
    const namespace = server === undefined ? undefined : this.namespaces.get(server);
    return server !== undefined && namespace !== undefined && namespace !== server ? { server, namespace } : undefined;
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

  private namespaceOf(server: string): string {
    return this.namespaces.get(server) ?? server;
  }
}

/** Before a list was seen (a client calling a tool by a name it already knows). */
function splitNatural(name: string): { server: string; tool: string } | undefined {
  const at = name.indexOf('__');
  return at > 0 ? { server: name.slice(0, at), tool: name.slice(at + 2) } : undefined;
}
