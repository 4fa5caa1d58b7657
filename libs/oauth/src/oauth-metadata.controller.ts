import { Controller, Inject, Param, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { Route } from '@aileron/http';
import { protectedResourceMetadata } from './domain/resource';
import { resourceMetadataView, resourceParams, serverResourceParams } from './oauth.schemas';

const DESCRIPTION =
  'RFC 9728 protected resource metadata of a workspace’s MCP endpoint: which authorization server issues tokens for it (this control plane) and the scope it offers. Public and the same for every name: it says nothing about whether the workspace exists. A 401 of the MCP endpoint points here (`WWW-Authenticate: Bearer resource_metadata=…`).';

/** Where MCP clients learn how to get a token for an MCP endpoint (RFC 9728, MCP authorization 2025-11-25). */
@Controller()
export class OauthMetadataController {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  @Route({
    method: 'GET',
    path: '/.well-known/oauth-protected-resource/mcp/:ws',
    summary: 'The OAuth protected resource metadata of a workspace’s MCP endpoint',
    description: DESCRIPTION,
    tag: 'oauth',
    auth: 'public',
    tenancy: 'none',
    params: resourceParams,
    response: resourceMetadataView,
    example: { params: { ws: 'default' } },
  })
  workspace(
    @Param() params: z.infer<typeof resourceParams>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): z.infer<typeof resourceMetadataView> {
    return this.metadata(params.ws, reply);
  }

  @Route({
    method: 'GET',
    path: '/.well-known/oauth-protected-resource/mcp/:ws/:server',
    summary: 'The same for one server’s MCP endpoint: the resource is the workspace’s endpoint, which covers it',
    description: DESCRIPTION,
    tag: 'oauth',
    auth: 'public',
    tenancy: 'none',
    params: serverResourceParams,
    response: resourceMetadataView,
    example: { params: { ws: 'default', server: 'sandbox' } },
  })
  server(
    @Param() params: z.infer<typeof serverResourceParams>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): z.infer<typeof resourceMetadataView> {
    return this.metadata(params.ws, reply);
  }

  private metadata(ws: string, reply: FastifyReply): z.infer<typeof resourceMetadataView> {
    // browser-based clients (the MCP Inspector) read it from another origin; it holds nothing private
    void reply.header('access-control-allow-origin', '*').header('cache-control', 'public, max-age=300');
    const publicUrl = this.config.publicUrl;
    return protectedResourceMetadata(publicUrl, ws, publicUrl) as z.infer<typeof resourceMetadataView>;
  }
}
