import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

// The console is served by the control plane (libs/platform/http console-fast-path.ts):
// hashed files under /assets, index.html for `/` and the sections in src/sections.json.
export default defineConfig({
  root,
  base: '/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../../dist/web', import.meta.url)),
    emptyOutDir: true,
    // scripts/build-web.mjs reads it to weigh the first page's JavaScript
    manifest: true,
    // no inline <script> or data: URL that the Content-Security-Policy would refuse
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2022',
    chunkSizeWarningLimit: 1024,
  },
  server: {
    // `npx vite --config apps/web/vite.config.mts` next to `npm start`: the API from the running control plane
    proxy: { '/v1': 'http://127.0.0.1:8080' },
  },
});
