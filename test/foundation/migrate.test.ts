import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/migrate.js';
import { projectRoot } from '../../src/project-root.js';
import { ADMIN_URL, TEST_DB_PREFIX, dbUrl } from '../helpers/db.js';

// These databases do not come from the template: each test starts from nothing, the way a
// fresh deployment's release step does.
const created: string[] = [];
const freshName = () => {
  const name = `${TEST_DB_PREFIX}m${randomBytes(5).toString('hex')}`;
  created.push(name);
  return name;
};
afterAll(async () => {
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  for (const name of created) await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
  await admin.end();
});

const migrationFiles = () =>
  readdirSync(join(projectRoot(), 'migrations'))
    .filter((f) => f.endsWith('.sql'))
    .map((f) => f.replace(/\.sql$/, ''))
    .sort();

async function applied(url: string): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return (await sql<{ name: string }[]>`SELECT name FROM pgmigrations ORDER BY run_on, id`).map((r) => r.name).sort();
  } finally {
    await sql.end();
  }
}

/** `npm run migrate` as the Procfile release step runs it. */
function npmMigrate(databaseUrl: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '-s', 'migrate'],
      {
        cwd: projectRoot(),
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: databaseUrl },
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
    );
  });
}

describe('migrations', () => {
  it('create the database when missing, apply every file once, and are a no-op the second time', async () => {
    const url = dbUrl(freshName());
    await migrate(url);
    expect(await applied(url)).toEqual(migrationFiles());
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    const [{ n: tables }] = await sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'`;
    await sql`INSERT INTO applications (name) VALUES ('kept')`;
    await migrate(url);
    const [{ n: after }] = await sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'`;
    const [{ n: apps }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM applications`;
    await sql.end();
    expect(after).toBe(tables);
    expect(apps).toBe(1);
    expect(await applied(url)).toEqual(migrationFiles());
  });

  it('from two processes at once, both succeed and each migration is applied exactly once', async () => {
    const url = dbUrl(freshName());
    const [a, b] = await Promise.all([npmMigrate(url), npmMigrate(url)]);
    expect(a.code, a.output).toBe(0);
    expect(b.code, b.output).toBe(0);
    const names = await applied(url);
    expect(names).toEqual(migrationFiles());
    expect(new Set(names).size).toBe(names.length);
  });

  it('fail with one clear line when the database cannot be reached', async () => {
    const r = await npmMigrate('postgres://postgres@127.0.0.1:1/nothing');
    expect(r.code).not.toBe(0);
    expect(r.output).toMatch(/^migrate failed: /m);
  });
});
