import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/project-root.js';

/**
 * The helpers read DATABASE_URL and REDIS_URL when their modules load, so a fresh process
 * shows what they make of them: it builds one test environment and reports where it points.
 */
function testEnvUnder(env: Record<string, string>): Promise<{ db: string; database: string; redis: string }> {
  const script = `
    const { createTestEnv } = await import('./test/helpers/stack.ts');
    const { default: postgres } = await import('postgres');
    const t = await createTestEnv();
    const sql = postgres(t.env.DATABASE_URL, { max: 1 });
    const [{ database }] = await sql\`SELECT current_database() AS database\`;
    await sql.end();
    await t.dropDatabase();
    console.log(JSON.stringify({ db: t.env.DATABASE_URL, database, redis: t.env.REDIS_URL }));
    process.exit(0);
  `;
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: projectRoot(), env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '')),
    ),
  );
}

describe('test helpers and the shared servers', () => {
  it('create their database on the server DATABASE_URL names, and use REDIS_URL as given', async () => {
    // The local server again, but named differently from the default in every part a helper
    // could hard-code: a password (trust authentication ignores it), a database that does not
    // exist (the helpers create theirs from the server's maintenance database), Redis db 3.
    const r = await testEnvUnder({
      DATABASE_URL: 'postgres://postgres:from-env@127.0.0.1:5432/not_created_here',
      REDIS_URL: 'redis://127.0.0.1:6379/3',
    });
    expect(r.db).toMatch(/^postgres:\/\/postgres:from-env@127\.0\.0\.1:5432\/gw_t_[0-9a-f]{8}_[0-9a-f]{12}$/);
    expect(r.database).toBe(new URL(r.db).pathname.slice(1));
    expect(r.redis).toBe('redis://127.0.0.1:6379/3');
  });

  it('default to the local servers when the variables are not set', async () => {
    const r = await testEnvUnder({});
    expect(r.db).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:5432\/gw_t_/);
    expect(r.redis).toBe('redis://127.0.0.1:6379/0');
  });
});
