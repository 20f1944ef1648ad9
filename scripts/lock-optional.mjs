// The registry mirror this project is developed against serves only linux-x64 builds of
// platform-specific optional packages, so `npm install` leaves them out of package-lock.json
// and `npm ci` then refuses the lock ("Missing: … from lock file"). This adds the missing
// optional entries, marked optional with the os/cpu their names declare, so `npm ci` skips
// them on machines they do not fit and fetches them where they do.
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const pkgs = lock.packages;
const OS = ['darwin', 'linux', 'win32', 'freebsd', 'android', 'openbsd', 'netbsd', 'sunos', 'aix', 'openharmony'];
const CPU = ['x64', 'arm64', 'arm', 'ia32', 'loong64', 'ppc64', 's390x', 'riscv64', 'mips64el', 'wasm32'];
let added = 0;
for (const [where, meta] of Object.entries(pkgs)) {
  for (const [name, version] of Object.entries(meta.optionalDependencies ?? {})) {
    const base = where ? `${where}/node_modules/${name}` : `node_modules/${name}`;
    if (pkgs[base] || pkgs[`node_modules/${name}`]) continue;
    const parts = name.split(/[-/]/);
    const entry = { version, optional: true };
    const os = parts.find((p) => OS.includes(p) || p === 'win32');
    const cpu = parts.find((p) => CPU.includes(p));
    if (os) entry.os = [os];
    if (cpu) entry.cpu = [cpu];
    pkgs[`node_modules/${name}`] = entry;
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(pkgs).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`lock-optional: added ${added} optional platform entries`);
