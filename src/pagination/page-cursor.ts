import { fail, ok, type Result } from '../errors.js';

/**
 * The cursor codec of resource listings (users, conversations…), separate from the ledger's
 * cursor: a page cursor names the sort key of the last row a page returned, tagged with the
 * listing it belongs to, so a users cursor handed to the conversations listing is refused
 * instead of silently paging somewhere else. Opaque base64url to clients.
 *
 * Compare with `(created_at, id) > (${at}::text::timestamptz, ${id}::uuid)`: the `::text`
 * matters — a parameter typed timestamptz is serialised by postgres.js through a JS Date,
 * which drops the microseconds and makes a page repeat its predecessor's last row.
 */
export interface PageKey {
  /** ISO 8601 timestamp of the last row (its `created_at`, at the database's precision). */
  at: string;
  /** Id of the last row: the tie-breaker of rows created at the same instant. */
  id: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const KIND = /^[a-z_]{1,32}$/;

export function encodePageCursor(kind: string, key: PageKey): string {
  if (!KIND.test(kind)) throw new Error(`bad page cursor kind ${kind}`);
  return Buffer.from(`p1|${kind}|${key.at}|${key.id}`, 'utf8').toString('base64url');
}

export function decodePageCursor(kind: string, raw: string): Result<PageKey> {
  const bad = fail(
    'INVALID_CURSOR',
    `Malformed cursor: pass back a next_cursor of this ${kind} listing exactly as the service returned it`,
  );
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 200 || !/^[A-Za-z0-9_-]+$/.test(raw)) return bad;
  const [v, k, at, id, ...rest] = Buffer.from(raw, 'base64url').toString('utf8').split('|');
  if (
    v !== 'p1' ||
    k !== kind ||
    rest.length ||
    !UUID.test(id ?? '') ||
    !/^\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(at ?? '') ||
    Number.isNaN(Date.parse(at))
  )
    return bad;
  return ok({ at, id });
}

/**
 * Cuts a fetched page (`limit + 1` rows asked for) into the page and its continuation.
 * `keyOf` gives a row's sort key; the cursor of the last row kept is the next page's start.
 */
export function toPage<T>(
  kind: string,
  rows: T[],
  limit: number,
  keyOf: (row: T) => PageKey,
): { rows: T[]; nextCursor: string | null; hasMore: boolean } {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { rows: page, nextCursor: last ? encodePageCursor(kind, keyOf(last)) : null, hasMore: rows.length > limit };
}
