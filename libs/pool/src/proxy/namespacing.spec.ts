import { describe, expect, it } from 'vitest';
import { Namespacing } from './namespacing';

function aggregate(): Namespacing {
  const names = new Namespacing(true);
  names.setServers([{ name: 'github', tool_prefix: 'gh' }, { name: 'jira' }, { name: 'git' }]);
  names.setTools([
    { server: 'github', tool: 'create_issue' },
    { server: 'jira', tool: 'create_issue' },
    { server: 'git', tool: 'status' },
  ]);
  return names;
}

describe("the aggregate endpoint's tool names", () => {
  it('names tools by the tool_prefix, else the server, and maps each name back to its server and tool', () => {
    const names = aggregate();
    expect(names.toolName('github', 'create_issue')).toBe('gh__create_issue');
    expect(names.toolName('jira', 'create_issue')).toBe('jira__create_issue');
    expect(names.resolveTool('gh__create_issue', '')).toEqual({ server: 'github', name: 'create_issue' });
    expect(names.resolveTool('jira__create_issue', '')).toEqual({ server: 'jira', name: 'create_issue' });
    // a name known before the list (a client that remembers it) routes by its prefix too
    expect(names.resolveTool('gh__list_repos', '')).toEqual({ server: 'github', name: 'list_repos' });
  });

  it('does not reach a prefixed server by its name, and says which prefix to use', () => {
    const names = aggregate();
    expect(names.resolveTool('github__create_issue', '')).toBeUndefined();
    expect(names.namespaceInstead('github__create_issue')).toEqual({ server: 'github', namespace: 'gh' });
    expect(names.namespaceInstead('jira__nothing')).toBeUndefined();
    expect(names.namespaceInstead('nothing')).toBeUndefined();
  });

  it('a prefix that clashes with another server gives way to the server name', () => {
    const names = new Namespacing(true);
    names.setServers([{ name: 'git' }, { name: 'github', tool_prefix: 'git' }]);
    names.setTools([
      { server: 'git', tool: 'status' },
      { server: 'github', tool: 'status' },
    ]);
    expect(names.toolName('git', 'status')).toBe('git__status');
    expect(names.toolName('github', 'status')).toBe('github__status');
    expect(names.resolveTool('github__status', '')).toEqual({ server: 'github', name: 'status' });
    expect(names.resolveTool('git__status', '')).toEqual({ server: 'git', name: 'status' });
  });

  it("one server behind the endpoint: names are the server's own", () => {
    const names = new Namespacing(false);
    expect(names.toolName('github', 'create_issue')).toBe('create_issue');
    expect(names.resolveTool('gh__x', 'github')).toEqual({ server: 'github', name: 'gh__x' });
  });
});
