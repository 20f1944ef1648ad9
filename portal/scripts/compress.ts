/**
 * Writes .br and .gz beside each built asset (the web process sends them to clients that accept
 * them) and prints what the first page costs in compressed JavaScript: the README's budget is
 * 250 KB, and a build over it fails.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const BUDGET_BYTES = 250 * 1024;
const dist = join(dirname(fileURLToPath(import.meta.url)), '../dist');

for (const name of readdirSync(join(dist, 'assets'))) {
  if (!/\.(js|css|svg|json)$/.test(name)) continue;
  const path = join(dist, 'assets', name);
  const bytes = readFileSync(path);
  writeFileSync(`${path}.br`, brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
  writeFileSync(`${path}.gz`, gzipSync(bytes, { level: 9 }));
}

// The first page loads the scripts index.html names and the modules they preload.
const html = readFileSync(join(dist, 'index.html'), 'utf8');
const scripts = [...html.matchAll(/(?:src|href)="\/portal\/(assets\/[^"]+\.js)"/g)].map((m) => m[1]);
const gzipped = scripts.reduce((sum, s) => sum + readFileSync(join(dist, `${s}.gz`)).length, 0);
const brotli = scripts.reduce((sum, s) => sum + readFileSync(join(dist, `${s}.br`)).length, 0);
process.stdout.write(
  `portal: first page JS ${(gzipped / 1024).toFixed(1)} KB gzip, ${(brotli / 1024).toFixed(1)} KB brotli (budget 250 KB)\n`,
);
if (gzipped > BUDGET_BYTES) {
  process.stderr.write('portal: the first page is over its 250 KB compressed JS budget\n');
  process.exit(1);
}
