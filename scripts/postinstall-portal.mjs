// `npm ci` builds the developer portal, so `npm ci && npm start` serves it at /portal.
// An install without dev dependencies (`npm ci --omit=dev`, e.g. beside a dist/ built
// elsewhere) has no Vite: it skips the build instead of failing the install.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

try {
  createRequire(new URL('../portal/package.json', import.meta.url)).resolve('vite');
} catch {
  console.log('portal: dev dependencies are not installed; skipping its build (npm run build builds it)');
  process.exit(0);
}
const run = spawnSync('npm', ['run', '-s', 'build', '-w', 'portal'], { stdio: 'inherit' });
process.exit(run.status ?? 1);
