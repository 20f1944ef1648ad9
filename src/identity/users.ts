import { z } from 'zod';
import type { Sql } from '../db.js';
import { AppError, fail, ok, type Failure, type Result } from '../errors.js';
import { decodePageCursor, toPage } from '../pagination/page-cursor.js';
import { PLATFORM_NAMES } from '../platforms/types.js';

/** A user's platform account as the API shows it (REST names; GraphQL maps them). */
export interface PlatformUserView {
  id: string;
  user_id: string;
  /** Lower-case platform name, as in event payloads (`telegram`). */
  platform: string;
  external_id: string;
  name: string | null;
  platform_connection_id: string | null;
  is_system_user: boolean;
  created_at: string;
}

export interface UserView {
  id: string;
  name: string | null;
  metadata: Record<string, unknown>;
  is_system: boolean;
  created_at: string;
  updated_at: string;
  platform_users: PlatformUserView[];
}

interface UserRow {
  id: string;
  name: string | null;
  metadata: Record<string, unknown>;
  is_system: boolean;
  created_at: string;
  updated_at: string;
  merged_into: string | null;
}

export const PAGE_KIND_USERS = 'users';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string) => UUID.test(s);

/** Timestamps as ISO 8601 with microseconds: page cursors compare at the database's precision. */
export const isoOf = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

const platformName = z
  .string()
  .transform((s) => s.toUpperCase())
  .pipe(z.enum(PLATFORM_NAMES));

export const listUsersInput = z.strictObject({
  /** Users with a platform user on this platform (any case: `telegram`, `TELEGRAM`). */
  platform: platformName.optional(),
  /** Users with a platform user of this external id (with `platform`: on that platform). */
  external_id: z.string().min(1).max(320).optional(),
  platform_connection_id: z.uuid().optional(),
  /** Case-insensitive substring of the user's name or of one of its platform users' names. */
  name_contains: z.string().trim().min(1).max(200).optional(),
  /** Include the users standing for connected accounts themselves (bots, pages, numbers). */
  include_system: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .or(z.boolean())
    .default(false),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  after: z.string().max(200).optional(),
});
export type ListUsersInput = z.infer<typeof listUsersInput>;

export const updateUserInput = z
  .strictObject({
    name: z.string().trim().min(1).max(200).nullable().optional(),
    /** Merged into the stored metadata key by key (JSON merge patch, top level): a null value deletes its key. */
    metadata: z.record(z.string().max(200), z.unknown()).optional(),
  })
  .refine((v) => v.name !== undefined || v.metadata !== undefined, 'give name and/or metadata');
export type UpdateUserInput = z.infer<typeof updateUserInput>;

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/** The failure a merged-away user's id answers with: 410 and where it went. */
export function userMerged(id: string, survivor: string | null): Failure {
  return {
    code: 'USER_MERGED',
    message: `User ${id} was merged into ${survivor ?? 'another user'}; use that id`,
    details: [{ path: ['id'], message: 'merged', merged_into: survivor }],
  };
}

export const userNotFound = (id: string, path: (string | number)[] = ['id']): Failure => ({
  code: 'NOT_FOUND',
  message: `No user ${id}`,
  details: [{ path, message: 'not found' }],
});

/**
 * A failure as the faces throw it, with the headers it implies: USER_MERGED a Location of the
 * survivor, LINK_CODE_ATTEMPTS_EXCEEDED a Retry-After.
 */
export function failureToAppError(f: Failure): AppError {
  const d = f.details?.[0];
  const headers: Record<string, string> = {};
  if (f.code === 'USER_MERGED' && typeof d?.merged_into === 'string') headers.Location = `/v1/users/${d.merged_into}`;
  if (f.code === 'LINK_CODE_ATTEMPTS_EXCEEDED' && typeof d?.retry_after_seconds === 'number')
    headers['Retry-After'] = String(d.retry_after_seconds);
  return new AppError(f.code, f.message, f.details, { headers });
}

/** Unwraps a result at a face (REST or GraphQL), throwing the failure with its headers. */
export function unwrapIdentity<T>(r: Result<T>): T {
  if (!r.ok) throw failureToAppError(r.error);
  return r.value;
}

/** The live user an id stands for (itself, or the survivor of its merges); null if it is not a user of the app. */
export async function resolveUserId(sql: Sql, appId: string, id: string): Promise<string | null> {
  if (!isUuid(id)) return null;
  const [row] = await sql<{ id: string | null }[]>`SELECT resolve_user_id(${appId}, ${id}) AS id`;
  return row?.id ?? null;
}

/** Looks up a user for a read or write: NOT_FOUND, USER_MERGED (with the survivor) or the row. */
async function liveUser(sql: Sql, appId: string, id: string, path?: (string | number)[]): Promise<Result<UserRow>> {
  if (!isUuid(id)) return fail('NOT_FOUND', `No user ${id}`, [{ path: path ?? ['id'], message: 'not found' }]);
  const [row] = await sql<UserRow[]>`
    SELECT id, name, metadata, is_system, ${sql.unsafe(isoOf('created_at'))} AS created_at,
           ${sql.unsafe(isoOf('updated_at'))} AS updated_at, merged_into
      FROM users WHERE app_id = ${appId} AND id = ${id}`;
  if (!row) return { ok: false, error: userNotFound(id, path) };
  if (row.merged_into) return { ok: false, error: userMerged(id, await resolveUserId(sql, appId, id)) };
  return ok(row);
}

async function platformUsersOf(sql: Sql, appId: string, userIds: string[]): Promise<Map<string, PlatformUserView[]>> {
  const byUser = new Map<string, PlatformUserView[]>(userIds.map((id) => [id, []]));
  if (userIds.length === 0) return byUser;
  const rows = await sql<PlatformUserView[]>`
    SELECT id, user_id, lower(platform) AS platform, external_id, name, platform_connection_id, is_system_user,
           ${sql.unsafe(isoOf('created_at'))} AS created_at
      FROM platform_users
     WHERE app_id = ${appId} AND user_id = ANY(${userIds}::uuid[])
     ORDER BY created_at, id`;
  for (const r of rows) byUser.get(r.user_id)?.push(r);
  return byUser;
}

/** One platform user of the application, or undefined. */
export async function getPlatformUser(sql: Sql, appId: string, id: string): Promise<PlatformUserView | undefined> {
  if (!isUuid(id)) return undefined;
  const [row] = await sql<PlatformUserView[]>`
    SELECT id, user_id, lower(platform) AS platform, external_id, name, platform_connection_id, is_system_user,
           ${sql.unsafe(isoOf('created_at'))} AS created_at
      FROM platform_users WHERE app_id = ${appId} AND id = ${id}`;
  return row;
}

const view = (row: UserRow, pus: PlatformUserView[]): UserView => ({
  id: row.id,
  name: row.name,
  metadata: row.metadata,
  is_system: row.is_system,
  created_at: row.created_at,
  updated_at: row.updated_at,
  platform_users: pus,
});

/**
 * A page of the application's live users (merged-away ones are gone from listings), oldest
 * first, each with its platform users. Filters combine with AND; `platform`, `external_id`
 * and `platform_connection_id` must hold for one same platform user.
 */
export async function listUsers(
  sql: Sql,
  appId: string,
  input: ListUsersInput,
): Promise<Result<{ users: UserView[]; nextCursor: string | null; hasMore: boolean }>> {
  const after = input.after !== undefined ? decodePageCursor(PAGE_KIND_USERS, input.after) : undefined;
  if (after && !after.ok) return after;
  const conds = [sql`u.app_id = ${appId}`, sql`u.merged_into IS NULL`];
  if (!input.include_system) conds.push(sql`NOT u.is_system`);
  if (after) conds.push(sql`(u.created_at, u.id) > (${after.value.at}::text::timestamptz, ${after.value.id}::uuid)`);
  if (input.platform !== undefined || input.external_id !== undefined || input.platform_connection_id !== undefined) {
    conds.push(sql`EXISTS (
      SELECT 1 FROM platform_users pu
       WHERE pu.user_id = u.id AND pu.app_id = ${appId}
         ${input.platform !== undefined ? sql`AND pu.platform = ${input.platform}` : sql``}
         ${input.external_id !== undefined ? sql`AND pu.external_id = ${input.external_id}` : sql``}
         ${input.platform_connection_id !== undefined ? sql`AND pu.platform_connection_id = ${input.platform_connection_id}` : sql``})`);
  }
  if (input.name_contains !== undefined) {
    const pattern = `%${escapeLike(input.name_contains)}%`;
    conds.push(sql`(u.name ILIKE ${pattern} OR EXISTS (
      SELECT 1 FROM platform_users pu WHERE pu.user_id = u.id AND pu.app_id = ${appId} AND pu.name ILIKE ${pattern}))`);
  }
  const where = conds.reduce((acc, c) => sql`${acc} AND ${c}`);
  const rows = await sql<UserRow[]>`
    SELECT u.id, u.name, u.metadata, u.is_system, ${sql.unsafe(isoOf('u.created_at'))} AS created_at,
           ${sql.unsafe(isoOf('u.updated_at'))} AS updated_at, u.merged_into
      FROM users u
     WHERE ${where}
     ORDER BY u.created_at, u.id
     LIMIT ${input.limit + 1}`;
  const page = toPage(PAGE_KIND_USERS, rows, input.limit, (r) => ({ at: r.created_at, id: r.id }));
  const pus = await platformUsersOf(
    sql,
    appId,
    page.rows.map((r) => r.id),
  );
  return ok({ users: page.rows.map((r) => view(r, pus.get(r.id) ?? [])), nextCursor: page.nextCursor, hasMore: page.hasMore });
}

/** One live user with its platform users; a merged-away id answers USER_MERGED naming the survivor. */
export async function getUser(sql: Sql, appId: string, id: string): Promise<Result<UserView>> {
  const row = await liveUser(sql, appId, id);
  if (!row.ok) return row;
  const pus = await platformUsersOf(sql, appId, [row.value.id]);
  return ok(view(row.value, pus.get(row.value.id) ?? []));
}

/** Renames a user and/or patches its metadata; a merged-away user cannot be changed (USER_MERGED). */
export async function updateUser(sql: Sql, appId: string, id: string, patch: UpdateUserInput): Promise<Result<UserView>> {
  const current = await liveUser(sql, appId, id);
  if (!current.ok) return current;
  const setName = patch.name !== undefined;
  const meta = patch.metadata ?? {};
  try {
    const [row] = await sql<UserRow[]>`
      UPDATE users SET
        name = CASE WHEN ${setName} THEN ${patch.name ?? null}::text ELSE name END,
        metadata = CASE WHEN ${patch.metadata !== undefined}
                        THEN (SELECT COALESCE(jsonb_object_agg(k, v), '{}'::jsonb)
                                FROM jsonb_each(users.metadata || ${sql.json(meta as never)}::jsonb) AS t(k, v)
                               WHERE v <> 'null'::jsonb)
                        ELSE metadata END,
        updated_at = now()
      WHERE app_id = ${appId} AND id = ${id} AND merged_into IS NULL
      RETURNING id, name, metadata, is_system, ${sql.unsafe(isoOf('created_at'))} AS created_at,
                ${sql.unsafe(isoOf('updated_at'))} AS updated_at, merged_into`;
    // Merged between the read and the write: answer as a read now would.
    if (!row) return getUser(sql, appId, id);
    const pus = await platformUsersOf(sql, appId, [row.id]);
    return ok(view(row, pus.get(row.id) ?? []));
  } catch (err) {
    if ((err as { code?: string }).code === '23514' && /metadata_size/.test(String((err as Error).message))) {
      return fail('VALIDATION_ERROR', 'metadata would exceed 64 KB', [{ path: ['metadata'], message: 'too large' }]);
    }
    throw err;
  }
}
