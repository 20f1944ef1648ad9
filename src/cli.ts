/**
 * Operator CLI. Each command prints one JSON line, so scripts can read it.
 *   app create --name NAME [--scopes a,b]   → {"app_id","api_key"}
 *   app list                                → one JSON line per application
 *   key create --app APP_ID [--scopes a,b]  → {"key_id","api_key"}
 *   key revoke KEY_ID                       → {"key_id","revoked":true}
 */
import { parseArgs } from 'node:util';
import { createApplication, listApplications, applicationExists } from './apps/applications.js';
import { createApiKey, isUuid, revokeApiKey } from './auth/api-keys.js';
import { parseScopeList } from './auth/scopes.js';
import { loadConfig } from './config.js';
import { createSql } from './db.js';

const USAGE = `usage:
  cli app create --name NAME [--scopes a,b]
  cli app list
  cli key create --app APP_ID [--scopes a,b]
  cli key revoke KEY_ID`;

function die(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { name: { type: 'string' }, scopes: { type: 'string' }, app: { type: 'string' } },
  allowPositionals: true,
  strict: true,
});
const [noun, verb, arg] = positionals;
const config = loadConfig();
const sql = createSql(config.DATABASE_URL, { max: 1 });
const print = (obj: unknown) => process.stdout.write(JSON.stringify(obj) + '\n');

try {
  const scopes = (() => {
    try {
      return parseScopeList(values.scopes);
    } catch (err) {
      return die((err as Error).message);
    }
  })();
  if (noun === 'app' && verb === 'create') {
    if (!values.name?.trim()) die('app create needs --name NAME');
    const app = await createApplication(sql, values.name.trim(), scopes);
    print({ app_id: app.appId, api_key: app.apiKey, key_id: app.keyId, scopes });
  } else if (noun === 'app' && verb === 'list') {
    for (const a of await listApplications(sql)) print({ app_id: a.id, name: a.name, created_at: a.created_at, active_keys: a.active_keys });
  } else if (noun === 'key' && verb === 'create') {
    if (!values.app || !isUuid(values.app) || !(await applicationExists(sql, values.app))) die(`key create needs --app with an existing application id`);
    const key = await createApiKey(sql, values.app, scopes);
    print({ key_id: key.keyId, api_key: key.apiKey, scopes });
  } else if (noun === 'key' && verb === 'revoke') {
    if (!arg) die('key revoke needs KEY_ID');
    if (!(await revokeApiKey(sql, arg))) die(`no active key ${arg}`);
    print({ key_id: arg, revoked: true });
  } else {
    die(USAGE);
  }
} finally {
  await sql.end({ timeout: 5 });
}
