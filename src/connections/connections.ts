import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Deps } from '../deps.js';
import { fail, ok, type ErrorDetail, type Result } from '../errors.js';
import { zodDetails } from '../http/zod-details.js';
import { checkOutboundUrl } from '../net/outbound-policy.js';
import { getAdapter } from '../platforms/registry.js';
import { PLATFORM_NAMES, type PlatformName } from '../platforms/types.js';
import { announceChange } from '../change-feed.js';
import { transaction, typed, type Sql, type Tx } from '../db.js';
import { claimRoutingIds, releaseRoutingIds, routingConflict, routingIdsOf } from './routing-ids.js';

export { routingIdsOf } from './routing-ids.js';

/**
 * Platforms sharing one inbound URL for the whole service (the Meta family, docs/inbound.md): those
 * whose adapter routes a payload by the account ids it names.
 */
export const SHARED_WEBHOOK_PLATFORMS: readonly PlatformName[] = PLATFORM_NAMES.filter((name) => getAdapter(name).routingIds !== undefined);

export const createConnectionInput = z.strictObject({
  platform_name: z.enum(PLATFORM_NAMES),
  name: z.string().trim().min(1).max(200),
  config: z.record(z.string(), z.unknown()),
});
export const updateConnectionInput = z
  .strictObject({
    name: z.string().trim().min(1).max(200).optional(),
    status: z.enum(['ACTIVE', 'DISABLED']).optional(),
    /** Merged over the stored config; secret fields left out keep their stored values. */
    config: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((v) => Object.keys(v).length > 0, 'nothing to update');

interface ConnectionRow {
  id: string;
  app_id: string;
  platform: PlatformName;
  name: string;
  config_sealed: string;
  config_public: Record<string, unknown>;
  webhook_secret_sealed: string;
  status: 'ACTIVE' | 'DISABLED';
  last_success_at: Date | null;
  last_error_at: Date | null;
  last_inbound_at: Date | null;
  last_error: string | null;
  consecutive_failures: number;
  created_at: Date;
  updated_at: Date;
}

/** A connection with its decrypted config: for workers and the inbound receiver only, never a response. */
export interface Connection {
  id: string;
  appId: string;
  platform: PlatformName;
  name: string;
  status: 'ACTIVE' | 'DISABLED';
  config: Record<string, unknown>;
  webhookSecret: string;
}

const MASK = '********';

/** Splits a validated config into sealed secrets and public fields, and the routing ids. */
function splitConfig(deps: Deps, platform: PlatformName, config: Record<string, unknown>) {
  const secretNames = new Set(getAdapter(platform).secretFields);
  const secrets: Record<string, unknown> = {};
  const pub: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) (secretNames.has(k) ? secrets : pub)[k] = v;
  return {
    sealed: deps.secrets.seal(JSON.stringify(secrets)),
    pub,
    routingIds: routingIdsOf(platform, config),
    verifyTokenHash: verifyTokenHashOf(deps, config),
  };
}

/** The keyed hash the Meta verification handshake finds a connection by (null without a verify token). */
function verifyTokenHashOf(deps: Deps, config: Record<string, unknown>): string | null {
  return typeof config.verify_token === 'string' && config.verify_token ? deps.secrets.fingerprint(config.verify_token) : null;
}

function validateConfig(deps: Deps, platform: PlatformName, config: Record<string, unknown>): Result<Record<string, unknown>> {
  const parsed = getAdapter(platform).configSchema.safeParse(config);
  if (!parsed.success) {
    const details: ErrorDetail[] = zodDetails(parsed.error, ['config']);
    return fail(
      'VALIDATION_ERROR',
      `Invalid ${platform} config: ${details.map((d) => `${d.path?.join('.')}: ${d.message}`).join('; ')}`,
      details,
    );
  }
  const value = parsed.data as Record<string, unknown>;
  const policy = deps.config.OUTBOUND_ADDRESS_POLICY;
  // A tenant's api_base_url (or SMTP server) is where our workers will send its credentials and
  // read answers from: it passes the same outbound address policy as webhook targets.
  for (const [field, protocol] of Object.entries(getAdapter(platform).addressFields)) {
    if (typeof value[field] !== 'string') continue;
    const checked = checkOutboundUrl(value[field], protocol, policy, ['config', field], 'VALIDATION_ERROR');
    if (!checked.ok) return checked;
  }
  return ok(value);
}

function open(deps: Deps, row: ConnectionRow): Connection {
  return {
    id: row.id,
    appId: row.app_id,
    platform: row.platform,
    name: row.name,
    status: row.status,
    config: { ...row.config_public, ...(JSON.parse(deps.secrets.open(row.config_sealed)) as Record<string, unknown>) },
    webhookSecret: deps.secrets.open(row.webhook_secret_sealed),
  };
}

/** The inbound URL of a connection: dedicated, or the platform's shared one. */
async function webhookUrlOf(deps: Deps, row: Pick<ConnectionRow, 'id' | 'platform' | 'webhook_secret_sealed'>): Promise<string> {
  const base = deps.config.PUBLIC_BASE_URL;
  if (SHARED_WEBHOOK_PLATFORMS.includes(row.platform)) {
    const shared = await sharedWebhook(deps, row.platform);
    return `${base}/webhooks/${shared.id}/${shared.secret}`;
  }
  return `${base}/webhooks/${row.id}/${deps.secrets.open(row.webhook_secret_sealed)}`;
}

/**
 * The connection's own inbound URL when it has one (not the Meta family's shared URL): what a
 * platform that takes a per-message status callback (Twilio's StatusCallback) is given.
 */
export function dedicatedWebhookUrl(deps: Deps, conn: Pick<Connection, 'id' | 'platform' | 'webhookSecret'>): string | undefined {
  if (SHARED_WEBHOOK_PLATFORMS.includes(conn.platform)) return undefined;
  return `${deps.config.PUBLIC_BASE_URL}/webhooks/${conn.id}/${conn.webhookSecret}`;
}

/** The service-wide inbound URL of a Meta-family platform, created on first use. */
async function sharedWebhook(deps: Deps, platform: PlatformName): Promise<{ id: string; secret: string }> {
  const sealed = deps.secrets.seal(randomBytes(24).toString('base64url'));
  await deps.sql`INSERT INTO shared_webhooks (platform, secret_sealed) VALUES (${platform}, ${sealed}) ON CONFLICT (platform) DO NOTHING`;
  const [row] = await deps.sql<
    { id: string; secret_sealed: string }[]
  >`SELECT id, secret_sealed FROM shared_webhooks WHERE platform = ${platform}`;
  return { id: row.id, secret: deps.secrets.open(row.secret_sealed) };
}

/** A connection as responses show it: secrets masked, health summarised. */
export async function toPublicConnection(deps: Deps, row: ConnectionRow) {
  const masked = Object.fromEntries(getAdapter(row.platform).secretFields.map((f) => [f, MASK]));
  const secretsPresent = JSON.parse(deps.secrets.open(row.config_sealed)) as Record<string, unknown>;
  const config = { ...row.config_public, ...Object.fromEntries(Object.keys(secretsPresent).map((k) => [k, masked[k] ?? MASK])) };
  return {
    id: row.id,
    name: row.name,
    platform_name: row.platform,
    config,
    webhook_url: await webhookUrlOf(deps, row),
    status: row.status,
    health: {
      status: row.consecutive_failures > 0 ? 'red' : row.last_success_at ? 'green' : 'unknown',
      last_success_at: row.last_success_at?.toISOString() ?? null,
      last_error_at: row.last_error_at?.toISOString() ?? null,
      last_inbound_at: row.last_inbound_at?.toISOString() ?? null,
      last_error: row.last_error,
      consecutive_failures: row.consecutive_failures,
    },
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
export type PublicConnection = Awaited<ReturnType<typeof toPublicConnection>>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const notFound = (id: string) => fail('PLATFORM_CONNECTION_NOT_FOUND', `Platform connection ${id} not found`);

export async function createConnection(
  deps: Deps,
  appId: string,
  input: z.infer<typeof createConnectionInput>,
): Promise<Result<PublicConnection>> {
  const config = validateConfig(deps, input.platform_name, input.config);
  if (!config.ok) return config;
  const { sealed, pub, routingIds, verifyTokenHash } = splitConfig(deps, input.platform_name, config.value);
  const row = await claiming(input.platform_name, deps, async (tx) => {
    const [inserted] = await tx<ConnectionRow[]>`
      INSERT INTO platform_connections (app_id, platform, name, config_sealed, config_public, webhook_secret_sealed, verify_token_hash)
      VALUES (${appId}, ${input.platform_name}, ${input.name}, ${sealed}, ${tx.json(pub as never)},
              ${deps.secrets.seal(randomBytes(24).toString('base64url'))}, ${verifyTokenHash})
      RETURNING *`;
    await claimRoutingIds(tx, { appId, connectionId: inserted.id }, input.platform_name, routingIds);
    return inserted;
  });
  if (!row.ok) return row;
  return ok(await toPublicConnection(deps, row.value));
}

/**
 * Runs a write that claims routing ids in one transaction; a claim another connection holds
 * rolls the whole write back and comes back as PLATFORM_CONNECTION_CONFLICT.
 */
async function claiming<T>(platform: PlatformName, deps: Deps, fn: (tx: Tx) => Promise<T>): Promise<Result<T>> {
  try {
    return ok(await transaction(deps.sql, fn));
  } catch (err) {
    const conflict = routingConflict(err, platform);
    if (conflict) return conflict;
    throw err;
  }
}

export async function listConnections(deps: Deps, appId: string): Promise<PublicConnection[]> {
  const rows = await deps.sql<ConnectionRow[]>`SELECT * FROM platform_connections WHERE app_id = ${appId} ORDER BY created_at, id`;
  return Promise.all(rows.map((r) => toPublicConnection(deps, r)));
}

async function rowOf(deps: Deps, appId: string, id: string): Promise<ConnectionRow | undefined> {
  if (!UUID.test(id)) return undefined;
  const [row] = await deps.sql<ConnectionRow[]>`SELECT * FROM platform_connections WHERE app_id = ${appId} AND id = ${id}`;
  return row;
}

export async function getConnection(deps: Deps, appId: string, id: string): Promise<Result<PublicConnection>> {
  const row = await rowOf(deps, appId, id);
  return row ? ok(await toPublicConnection(deps, row)) : notFound(id);
}

/** Loads a connection with its secrets, scoped by application. */
export async function loadConnection(deps: Deps, appId: string, id: string): Promise<Connection | undefined> {
  const row = await rowOf(deps, appId, id);
  return row ? open(deps, row) : undefined;
}

/** For the inbound receiver, which knows only the connection id from the URL. */
export async function loadConnectionById(deps: Deps, id: string): Promise<Connection | undefined> {
  if (!UUID.test(id)) return undefined;
  const [row] = await deps.sql<ConnectionRow[]>`SELECT * FROM platform_connections WHERE id = ${id}`;
  return row ? open(deps, row) : undefined;
}

/**
 * The active owners of `ids` on `platform` (shared Meta URLs): each id has at most one owner
 * across all applications (src/connections/routing-ids.ts), so a payload reaches only them.
 */
export async function connectionsByRoutingIds(deps: Deps, platform: PlatformName, ids: string[]): Promise<Connection[]> {
  if (ids.length === 0) return [];
  const rows = await deps.sql<ConnectionRow[]>`
    SELECT c.* FROM connection_routing_ids r
      JOIN platform_connections c ON c.app_id = r.app_id AND c.id = r.connection_id
     WHERE r.platform = ${platform} AND r.routing_id = ANY(${ids}::text[]) AND c.status = 'ACTIVE'`;
  return rows.map((r) => open(deps, r));
}

/**
 * The active connection of a Meta-family platform whose verify token is `token`, for the
 * unauthenticated verification handshake: one indexed lookup by the token's keyed hash, never
 * a scan decrypting every tenant's connection. A row stored before the hash existed (null) is
 * fetched by the same statement, checked, and given its hash, so each such row costs a
 * decryption once, on the first handshake after the upgrade.
 */
export async function connectionByVerifyToken(deps: Deps, platform: PlatformName, token: string): Promise<Connection | undefined> {
  const hash = deps.secrets.fingerprint(token);
  const rows = await deps.sql<(ConnectionRow & { verify_token_hash: string | null })[]>`
    SELECT * FROM platform_connections
     WHERE platform = ${platform} AND status = 'ACTIVE' AND (verify_token_hash = ${hash} OR verify_token_hash IS NULL)`;
  let found = rows.find((r) => r.verify_token_hash === hash);
  for (const row of rows.filter((r) => r.verify_token_hash === null)) {
    const conn = open(deps, row);
    const own = verifyTokenHashOf(deps, conn.config);
    if (own === null) continue;
    await deps.sql`UPDATE platform_connections SET verify_token_hash = ${own} WHERE app_id = ${row.app_id} AND id = ${row.id} AND verify_token_hash IS NULL`;
    if (own === hash) found ??= row;
  }
  return found && open(deps, found);
}

export async function updateConnection(
  deps: Deps,
  appId: string,
  id: string,
  patch: z.infer<typeof updateConnectionInput>,
): Promise<Result<PublicConnection>> {
  const row = await rowOf(deps, appId, id);
  if (!row) return notFound(id);
  let sealed = row.config_sealed;
  let pub = row.config_public;
  let routingIds: string[] | undefined;
  let verifyTokenHash = verifyTokenHashOf(deps, open(deps, row).config);
  if (patch.config) {
    const merged = { ...open(deps, row).config, ...patch.config };
    const config = validateConfig(deps, row.platform, merged);
    if (!config.ok) return config;
    ({ sealed, pub, routingIds, verifyTokenHash } = splitConfig(deps, row.platform, config.value));
  }
  const written = await claiming(row.platform, deps, async (tx) => {
    const [updated] = await tx<ConnectionRow[]>`
      UPDATE platform_connections SET
        name = ${patch.name ?? row.name}, status = ${patch.status ?? row.status},
        config_sealed = ${sealed}, config_public = ${tx.json(pub as never)},
        verify_token_hash = ${verifyTokenHash}, updated_at = now()
      WHERE app_id = ${appId} AND id = ${id}
      RETURNING *`;
    // Only a config change can move the ids; a rename or status change keeps the claims.
    if (updated && routingIds) await claimRoutingIds(tx, { appId, connectionId: id }, row.platform, routingIds);
    return updated;
  });
  if (!written.ok) return written;
  const updated = written.value;
  if (!updated) return notFound(id);
  await announceChange(deps, 'connections', id);
  return ok(await toPublicConnection(deps, updated));
}

export async function deleteConnection(deps: Deps, appId: string, id: string): Promise<Result<true>> {
  if (!UUID.test(id)) return notFound(id);
  const rows = await transaction(deps.sql, async (tx) => {
    await releaseRoutingIds(tx, { appId, connectionId: id });
    return tx`DELETE FROM platform_connections WHERE app_id = ${appId} AND id = ${id} RETURNING id`;
  });
  if (!rows.length) return notFound(id);
  await announceChange(deps, 'connections', id);
  return ok(true);
}

/** Records a platform call's outcome on the connection's health. */
export async function recordHealth(
  deps: Deps,
  conn: Pick<Connection, 'appId' | 'id'>,
  outcome: { ok: true } | { ok: false; error: string },
): Promise<void> {
  if (outcome.ok) await deps.sql`WITH ${successesOf(deps.sql, conn.appId, [conn.id])} SELECT 1`;
  else
    await deps.sql`
      UPDATE platform_connections SET last_error_at = now(), last_error = ${outcome.error.slice(0, 500)},
             consecutive_failures = consecutive_failures + 1
       WHERE app_id = ${conn.appId} AND id = ${conn.id}`;
}

/**
 * Records successful platform calls on the connections' health, as a CTE of the caller's
 * statement (every send succeeds through here: src/messages/settle.ts). A row is touched only
 * when something changes (or once a second for last_success_at), so a busy connection's sends
 * do not queue on its row lock.
 */
export function successesOf(sql: Sql, appId: string, connectionIds: string[]) {
  return sql`
    health AS (
      UPDATE platform_connections SET last_success_at = now(), consecutive_failures = 0
       WHERE app_id = ${typed.uuid(sql, appId)} AND id = ANY(${typed.uuids(sql, connectionIds)})
         AND (consecutive_failures > 0 OR last_success_at IS NULL OR last_success_at < now() - interval '1 second')
    )`;
}

/**
 * Notes when the platform last delivered something to the connection (its health). Like a
 * send's success, it writes at most once a second per connection, so a burst of deliveries
 * does not queue on the row's lock.
 */
export async function recordInbound(deps: Deps, conn: Pick<Connection, 'appId' | 'id'>, receivedAt: string): Promise<void> {
  await deps.sql`
    UPDATE platform_connections SET last_inbound_at = ${receivedAt}
     WHERE app_id = ${conn.appId} AND id = ${conn.id} AND (last_inbound_at IS NULL OR last_inbound_at < ${receivedAt}::timestamptz - interval '1 second')`;
}
