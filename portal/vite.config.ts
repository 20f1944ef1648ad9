import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Served by the web process under /portal (src/http): hashed files in /portal/assets/ are cached
// for good, index.html never is.
export default defineConfig({
  base: '/portal/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    // The first page's budget is 250 KB of compressed JS (README): report it on every build.
    reportCompressedSize: true,
    target: 'es2022',
  },
  server: {
    // `npm run dev -w portal` beside `npm start`: the API, the stream and the session on the service.
    proxy: Object.fromEntries(['/v1', '/graphql', '/events', '/portal/session'].map((p) => [p, 'http://127.0.0.1:3000'])),
  },
});
