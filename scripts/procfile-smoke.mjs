// Starts the built service the way production does — the Procfile's `release`, then `web` and
// `worker` as separate processes running dist/ with NODE_ENV=production — and checks that it
// serves: readiness, a key from the built CLI, an event committed by the worker process, that
// event on the live stream, GraphQL, metrics, and a clean exit on SIGTERM. CI runs it after
// `npm run build`, so a build that type-checks but does not start fails the run.
//
//   npm run build && npm run smoke:dist
//
// Needs PostgreSQL and Redis on their default local ports; uses its own database and Redis
// key prefix and removes both at the end. Exit 0 = every check passed.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';

const PG = process.env.SMOKE_PG_BASE ?? 'postgres://postgres@127.0.0.1:5432';
const REDIS_URL = process.env.SMOKE_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

if (!existsSync('dist/src/web.js')) {
  console.log('dist/ is missing: run `npm run build` first');
  process.exit(1);
}

/** The Procfile's process types and their commands. */
const procfile = Object.fromEntries(
  readFileSync('Procfile', 'utf8')
    .split('\n')
    .map((l) => l.match(/^([a-z]+):\s*(.+)$/))
    .filter(Boolean)
    .map((m) => [m[1], m[2].trim()]),
);
for (const type of ['release', 'web', 'worker']) {
  if (!procfile[type]) {
    console.log(`Procfile has no ${type} process`);
    process.exit(1);
  }
}

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const tag = `gw_procfile_${randomBytes(5).toString('hex')}`;
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const env = {
  ...process.env,
  NODE_ENV: 'production',
  PORT: String(port),
  PUBLIC_BASE_URL: base,
  DATABASE_URL: `${PG}/${tag}`,
  REDIS_URL,
  REDIS_PREFIX: tag,
  ADMIN_TOKEN: 'procfile-smoke-admin-token',
  SECRETS_KEY: 'procfile-smoke-secrets-key-0123456789abcdef',
  LOG_LEVEL: 'warn',
  SHUTDOWN_TIMEOUT_MS: '5000',
};

/** Runs a Procfile command line (`node dist/…`) to completion; its output on failure. */
function runToEnd(command) {
  const [bin, ...args] = command.split(/\s+/);
  return execFileSync(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 }).toString();
}

/** Starts a long-running Procfile process, keeping the tail of its output for failures. */
function start(type) {
  const [bin, ...args] = procfile[type].split(/\s+/);
  const child = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (d) => {
    log = (log + d).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { type, child, exited, log: () => log };
}

const results = [];
async function check(name, fn) {
  try {
    await Promise.race([fn(), sleep(30_000).then(() => Promise.reject(new Error('timed out after 30 s')))]);
    results.push([name, true, '']);
  } catch (err) {
    results.push([name, false, String(err?.message ?? err).slice(0, 300)]);
  }
}
function assert(cond, message) {
  if (!cond) throw new Error(message);
}

let app;
const procs = [];
try {
  await check('release (migrate) exits 0 on a new database, and again when there is nothing to do', async () => {
    runToEnd(procfile.release);
    runToEnd(procfile.release);
  });
  await check('the built CLI creates an application', async () => {
    const out = execFileSync('node', ['dist/src/cli.js', 'app', 'create', '--name', 'procfile-smoke'], { env }).toString();
    app = JSON.parse(out.trim().split('\n').pop());
    assert(app.app_id && app.api_key, `cli printed ${out.slice(-200)}`);
  });
  procs.push(start('web'), start('worker'));
  await check('web comes up: /healthz and /readyz answer 200', async () => {
    for (;;) {
      const dead = procs.find((p) => p.child.exitCode !== null);
      assert(!dead, `${dead?.type} exited: ${dead?.log().slice(-500)}`);
      const r = await fetch(`${base}/readyz`).catch(() => null);
      if (r?.status === 200) break;
      await sleep(200);
    }
    assert((await fetch(`${base}/healthz`)).status === 200, '/healthz');
  });
  const headers = { Authorization: `Bearer ${app?.api_key}`, 'X-Service-App-ID': app?.app_id, 'Content-Type': 'application/json' };
  await check('the worker process commits an event: POST /v1/events answers 201, GET lists it', async () => {
    const r = await fetch(`${base}/v1/events`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ event_type: 'smoke.one', payload: { n: 1 } }),
    });
    const body = await r.json();
    assert(r.status === 201, `POST /v1/events ${r.status} ${JSON.stringify(body).slice(0, 200)}`);
    const list = await (await fetch(`${base}/v1/events?event_type=smoke.one`, { headers })).json();
    assert(
      list.data?.some((e) => e.id === body.id),
      `GET /v1/events does not list ${body.id}`,
    );
  });
  await check('the live stream delivers an event committed after it opened', async () => {
    const ac = new AbortController();
    const stream = await fetch(`${base}/events/stream`, { headers, signal: ac.signal });
    assert(stream.status === 200, `stream ${stream.status}`);
    const reader = stream.body.getReader();
    await fetch(`${base}/v1/events`, { method: 'POST', headers, body: JSON.stringify({ event_type: 'smoke.live', payload: {} }) });
    let text = '';
    while (!text.includes('smoke.live')) {
      const { value, done } = await reader.read();
      assert(!done, 'stream ended');
      text += Buffer.from(value).toString();
    }
    ac.abort();
  });
  await check('GraphQL answers a query', async () => {
    const r = await fetch(`${base}/graphql`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ query: '{ events(first: 5) { edges { node { id eventType } } } }' }),
    });
    const body = await r.json();
    assert(r.status === 200 && !body.errors, `${r.status} ${JSON.stringify(body).slice(0, 300)}`);
  });
  await check('/metrics serves Prometheus text', async () => {
    const r = await fetch(`${base}/metrics`);
    assert(r.status === 200 && (await r.text()).includes('# TYPE'), `/metrics ${r.status}`);
  });
  await check('SIGTERM: web and worker exit 0', async () => {
    for (const p of procs) p.child.kill('SIGTERM');
    for (const p of procs) {
      const { code, signal } = await p.exited;
      assert(code === 0, `${p.type} exited with ${code ?? signal}: ${p.log().slice(-500)}`);
    }
  });
} finally {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  try {
    execFileSync('psql', [`${PG}/postgres`, '-qc', `DROP DATABASE IF EXISTS ${tag} WITH (FORCE)`], { stdio: 'ignore' });
  } catch {}
  try {
    const keys = execFileSync('redis-cli', ['-u', REDIS_URL, '--scan', '--pattern', `${tag}:*`], { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .split('\n')
      .filter(Boolean);
    for (let i = 0; i < keys.length; i += 500)
      execFileSync('redis-cli', ['-u', REDIS_URL, 'DEL', ...keys.slice(i, i + 500)], { stdio: 'ignore' });
  } catch {}
}

for (const [name, ok, why] of results) console.log(`${ok ? 'PASS' : 'FAIL'} ${name}${ok ? '' : ` — ${why}`}`);
const passed = results.filter((r) => r[1]).length;
console.log(`procfile smoke: ${passed}/${results.length} checks pass`);
process.exit(passed === results.length && results.length === 8 ? 0 : 1);
