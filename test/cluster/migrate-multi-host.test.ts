import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { primaryUrl } from '../../src/db-primary.js';
import { migrate } from '../../src/migrate.js';
import { projectRoot } from '../../src/project-root.js';
import { runCli } from '../helpers/cli.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../helpers/postgres-replicated.js';

/**
 * The release step and the CLI against a primary with a synchronous standby, given one
 * DATABASE_URL that lists both servers (the standby first), as an HA deployment sets it: each
 * finds the primary itself, before and after a failover.
 */
let pg: ReplicatedPostgres;
beforeAll(async () => {
  pg = await startReplicatedPostgres();
});
afterAll(async () => {
  await pg?.destroy();
});

const migrationCount = readdirSync(join(projectRoot(), 'migrations')).filter((f) => f.endsWith('.sql')).length;
/** Both servers, standby first, with nothing saying which is primary. */
const bareUrl = (db: string) => `postgres://postgres@127.0.0.1:${pg.standby.port},127.0.0.1:${pg.primary.port}/${db}`;

async function appliedOn(base: string, db: string): Promise<number> {
  const sql = postgres(`${base}/${db}`, { max: 1, onnotice: () => {} });
  try {
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pgmigrations`;
    return n;
  } finally {
    await sql.end();
  }
}

const cliEnv = (url: string) => ({ DATABASE_URL: url, REDIS_URL: 'redis://127.0.0.1:6379/0', LOG_LEVEL: 'silent' });

describe('a DATABASE_URL naming a primary and its standby', () => {
  it('migrations create the database and run on the primary, whichever server is listed first', async () => {
    await migrate(pg.url('gw_first'));
    await migrate(bareUrl('gw_bare'));
    expect(await appliedOn(pg.primary.base, 'gw_first')).toBe(migrationCount);
    expect(await appliedOn(pg.primary.base, 'gw_bare')).toBe(migrationCount);
  });

  it('without a primary (a failover under way) migrations fail naming what each server is', async () => {
    const url = `postgres://postgres@127.0.0.1:${pg.standby.port},127.0.0.1:1/gw_none`;
    await expect(migrate(url)).rejects.toThrow(
      new RegExp(
        `^no primary among the servers of DATABASE_URL \\(127\\.0\\.0\\.1:${pg.standby.port}: standby; 127\\.0\\.0\\.1:1: unreachable`,
      ),
    );
    expect(await primaryUrl(bareUrl('gw_bare'))).toBe(`${pg.primary.base}/gw_bare`);
  });

  it('the CLI writes on the primary with the standby listed first', async () => {
    const created = await runCli(cliEnv(bareUrl('gw_bare')), ['app', 'create', '--name', 'multi-host']);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout).app_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('after the primary is lost and the standby promoted, migrations and the CLI find the new primary', async () => {
    await pg.primary.kill();
    await pg.promote();
    // A database that does not exist yet: it is created, and every migration applied, on the promoted server.
    await migrate(pg.url('gw_after'));
    expect(await appliedOn(pg.standby.base, 'gw_after')).toBe(migrationCount);
    // And the release step run again on a migrated database is a no-op there.
    await migrate(bareUrl('gw_first'));
    expect(await appliedOn(pg.standby.base, 'gw_first')).toBe(migrationCount);

    const created = await runCli(cliEnv(bareUrl('gw_bare')), ['app', 'create', '--name', 'after-failover']);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const listed = await runCli(cliEnv(pg.url('gw_bare')), ['app', 'list']);
    expect(
      listed.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).name)
        .sort(),
    ).toEqual(['after-failover', 'multi-host']);
  });
});
