import { describe, expect, it } from 'vitest';
import { mcpChallenge, mcpResource, workspaceOfMcpPath, workspaceOfResource } from './resource';

const BASE = 'https://aileron.example.com';

describe('MCP endpoints as protected resources', () => {
  it('names one resource per workspace, and reads the workspace back only from exactly that', () => {
    expect(mcpResource(BASE, 'team-a')).toBe(`${BASE}/mcp/team-a`);
    expect(workspaceOfResource(BASE, `${BASE}/mcp/team-a`)).toBe('team-a');
    for (const other of [
      `${BASE}/mcp/team-a/github`,
      `${BASE}/mcp/team-a?x=1`,
      `${BASE}/mcp/team-a#f`,
      `${BASE}/mcp/`,
      `${BASE}/v1/workspaces`,
      `https://evil.example.com/mcp/team-a`,
      `${BASE}.evil.example.com/mcp/team-a`,
      `${BASE}/mcp/Team-A`,
      `${BASE}/mcp/-a`,
    ])
      expect(workspaceOfResource(BASE, other), other).toBeNull();
  });

  it('finds the workspace of the three MCP paths, and of nothing else', () => {
    expect(workspaceOfMcpPath('/mcp/team-a')).toBe('team-a');
    expect(workspaceOfMcpPath('/mcp/team-a/github?x=1')).toBe('team-a');
    expect(workspaceOfMcpPath('/mcp/team-a/sandbox')).toBe('team-a');
    expect(workspaceOfMcpPath('/mcp/team-a/github/extra')).toBeNull();
    expect(workspaceOfMcpPath('/v1/workspaces/team-a')).toBeNull();
    expect(workspaceOfMcpPath('/mcp/%2e%2e')).toBeNull();
  });

  it('challenges with the metadata URL by path insertion, and invalid_token when a token came', () => {
    expect(mcpChallenge(BASE, '/mcp/team-a/github', false)).toBe(
      `Bearer resource_metadata="${BASE}/.well-known/oauth-protected-resource/mcp/team-a", scope="mcp"`,
    );
    expect(mcpChallenge(BASE, '/mcp/team-a', true)).toMatch(/, error="invalid_token"$/);
    expect(mcpChallenge(BASE, '/v1/me', true)).toBeUndefined();
  });
});
