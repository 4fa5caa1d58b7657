// The bridge's public face, apart from the pool's: the program (apps/mcp-bridge)
// loads only this, so it starts with node and the MCP SDK, without Nest.
export { createBridgeServer } from './bridge-server';
export type { BridgeServer, BridgeServerOptions } from './bridge-server';
export { compiledBridgePath, ensureBridgeBuilt } from './compiled-bridge';
export { createSessionSpawner, SESSION_TAG } from './session-spawner';
export type { SessionSpawner, SessionSpawnerOptions } from './session-spawner';
export type { ServerCommand } from './server-process';
