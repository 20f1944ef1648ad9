import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN_URL, TEST_DB_PREFIX, dbUrl } from '../helpers/db.js';
import { freePort, spawnService, type ChildService } from '../helpers/stack.js';

// `npm start` on a machine that has never seen the service: the database does not exist yet.
const dbName = `${TEST_DB_PREFIX}dev${randomBytes(4).toString('hex')}`;
const children: ChildService[] = [];
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
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

async function start(port: number): Promise<ChildService> {
  const env = {
    DATABASE_URL: dbUrl(dbName),
    REDIS_PREFIX: `t${randomBytes(5).toString('hex')}`,
    PORT: String(port),
    LOG_LEVEL: 'info',
  };
  const svc = spawnService('src/dev.ts', env);
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
    const sql = postgres(dbUrl(dbName), { max: 1, onnotice: () => {} });
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM applications`;
    await sql.end();
    expect(n).toBe(1);
  });
});
