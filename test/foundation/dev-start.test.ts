import { execFile, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN_URL, TEST_DB_PREFIX, dbUrl } from '../helpers/db.js';
import { projectRoot } from '../../src/project-root.js';
import { freePort, spawnService, type ChildService } from '../helpers/stack.js';

// `npm start` on a machine that has never seen the service: the database does not exist yet.
const dbName = `${TEST_DB_PREFIX}dev${randomBytes(4).toString('hex')}`;
const children: ChildService[] = [];
/** Process groups of `npm start` runs: whatever of them is left when the file ends is killed. */
const groups: number[] = [];
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const g of groups) {
    try {
      process.kill(-g, 'SIGKILL');
    } catch {
      // the group is gone: what the test wanted
    }
  }
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
  await admin.end();
});

const sh = (command: string) =>
  new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile('sh', ['-c', command], { timeout: 15_000 }, (err, stdout) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout }),
    );
  });

const envFor = (port: number) => ({
  DATABASE_URL: dbUrl(dbName),
  REDIS_PREFIX: `t${randomBytes(5).toString('hex')}`,
  PORT: String(port),
  LOG_LEVEL: 'info',
});

async function start(port: number): Promise<ChildService> {
  const svc = spawnService('src/dev.ts', envFor(port));
  children.push(svc);
  return svc;
}

describe('npm start (src/dev.ts)', () => {
  it('migrates a fresh database, serves /readyz within 30 s, creates a demo app whose printed curl works, and stops on SIGTERM', async () => {
    const port = await freePort();
    const started = Date.now();
    const svc = await start(port);
    await svc.waitFor(/Demo application created[\s\S]*curl [^\n]+\n/, 30_000);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(30_000);

    const curl = /^\s*(curl .+)$/m.exec(svc.output())![1];
    const r = await sh(`${curl} -w '\\n%{http_code}'`);
    expect(r.code).toBe(0);
    const [body, status] = r.stdout.trim().split('\n');
    expect(status).toBe('200');
    expect(JSON.parse(body)).toEqual({ data: [], has_more: false });

    svc.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
  });

  it('does not create a second demo app on the next start', async () => {
    const port = await freePort();
    const svc = await start(port);
    await svc.waitFor(/web listening/, 30_000);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    svc.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    expect(svc.output()).not.toMatch(/Demo application created/);
    // The demo key was shown once, on the first start: a restart says how to get another.
    expect(svc.output()).toMatch(/npm run cli -- key create --app [0-9a-f-]{36}/);
    const sql = postgres(dbUrl(dbName), { max: 1, onnotice: () => {} });
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM applications`;
    await sql.end();
    expect(n).toBe(1);
  });

  // Before the fix npm passed SIGTERM to its `sh -c`, which died of it; tsx and the server kept running.
  it('stops, every process of it, when SIGTERM is sent to the npm process alone', { timeout: 120_000 }, async () => {
    const port = await freePort();
    const npm = spawn('npm', ['start'], {
      cwd: projectRoot(),
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...envFor(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so the test can list (and in the end kill) everything npm started.
      detached: true,
    });
    const pgid = npm.pid!;
    groups.push(pgid);
    let out = '';
    npm.stdout!.on('data', (d) => (out += d));
    npm.stderr!.on('data', (d) => (out += d));
    await poll(
      async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200,
      45_000,
      () => `readyz on ${port}:\n${out.slice(-2000)}`,
    );
    expect((await groupMembers(pgid)).length).toBeGreaterThan(1);

    process.kill(npm.pid!, 'SIGTERM');
    await poll(
      async () => (await groupMembers(pgid)).length === 0,
      30_000,
      async () => `processes left: ${(await groupMembers(pgid)).join('; ')}\n${out.slice(-2000)}`,
    );
    expect(await portTaken(port)).toBe(false);
    expect(out).toMatch(/shutdown complete/);
  });
});

/** `pid command` of every live process in the group. */
const groupMembers = async (pgid: number) =>
  (await sh(`ps -eo pid=,pgid=,stat=,args= | awk '$2 == ${pgid} && $3 !~ /^Z/'`)).stdout.trim().split('\n').filter(Boolean);

const portTaken = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** Waits for `done`, checking every 200 ms, failing after `timeoutMs` with what `why` says. */
async function poll(done: () => Promise<boolean>, timeoutMs: number, why: () => string | Promise<string>): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${await why()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
