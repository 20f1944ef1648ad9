import postgres from 'postgres';

/**
 * A connection URL may name several servers, `postgres://user@h1:5432,h2:5432/db?…`, as libpq
 * and postgres.js accept: an HA deployment lists its primary and standbys, and whichever is
 * primary now takes the writes. Tools that take one server only (node-pg-migrate's `pg`,
 * WHATWG `URL`) get that one from `primaryUrl`.
 */
const MULTI_HOST = /^(postgres(?:ql)?:\/\/)(?:([^@/?#]*)@)?([^/?#]*)(.*)$/;

/** One single-host URL per server the URL names, in its order; `target_session_attrs` is dropped (each names one server). */
function eachHost(databaseUrl: string): string[] {
  const m = MULTI_HOST.exec(databaseUrl);
  if (!m) throw new Error('DATABASE_URL: expected postgres://[user[:password]@]host[:port][,host[:port]…][/database][?…]');
  const [, scheme, userinfo, hosts, rest] = m;
  return hosts.split(',').map((host) => {
    const url = new URL(`${scheme}${userinfo === undefined ? '' : `${userinfo}@`}${host}${rest}`);
    url.searchParams.delete('target_session_attrs');
    return url.toString();
  });
}

const where = (url: string) => new URL(url).host;

/**
 * The single-host URL of the server that is primary now (not in recovery), trying the listed
 * servers in order; a URL naming one server is returned as it is, unprobed. Throws naming
 * what each server was when none is primary (all standbys or unreachable: a failover under way).
 */
export async function primaryUrl(databaseUrl: string): Promise<string> {
  const hosts = eachHost(databaseUrl);
  if (hosts.length === 1) return databaseUrl;
  const seen: string[] = [];
  for (const url of hosts) {
    const role = await roleOf(url).catch((err: Error) => `unreachable (${err.message})`);
    if (role === 'primary') return url;
    seen.push(`${where(url)}: ${role}`);
  }
  throw new Error(`no primary among the servers of DATABASE_URL (${seen.join('; ')})`);
}

async function roleOf(url: string): Promise<'primary' | 'standby'> {
  const sql = postgres(url, { max: 1, connect_timeout: 5, onnotice: () => {}, connection: { application_name: 'messaging-gateway' } });
  try {
    const [{ standby }] = await sql<{ standby: boolean }[]>`SELECT pg_is_in_recovery() AS standby`;
    return standby ? 'standby' : 'primary';
  } catch (err) {
    // The database may not exist yet (first migration): the server's role is the same in any.
    if ((err as { code?: string }).code !== '3D000') throw err;
    const admin = new URL(url);
    admin.pathname = '/postgres';
    return roleOf(admin.toString());
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/**
 * The URL with `target_session_attrs=primary` when it names several servers and says nothing
 * of which to use: postgres.js would otherwise take the first that answers, standby or not, and
 * a write there fails read-only. It then finds the primary at every connect, so after a failover too.
 */
export function targetingPrimary(databaseUrl: string): string {
  if (eachHost(databaseUrl).length === 1 || /[?&]target_session_attrs=/.test(databaseUrl)) return databaseUrl;
  return `${databaseUrl}${databaseUrl.includes('?') ? '&' : '?'}target_session_attrs=primary`;
}
