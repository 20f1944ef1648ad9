// `prepare` builds dist/ on `npm install` from a checkout (the root's `npm ci` runs it for this
// workspace) and before `npm pack`, so the package can be imported as documented. An install
// without dev dependencies has no TypeScript: it skips the build instead of failing the install.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  console.log('@messaging-gateway/client: TypeScript is not installed; skipping its build (npm run build builds it)');
  process.exit(0);
}
const run = spawnSync(process.execPath, [tsc, '-p', new URL('../tsconfig.json', import.meta.url).pathname], { stdio: 'inherit' });
process.exit(run.status ?? 1);
