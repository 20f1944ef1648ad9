import { createHash, randomInt } from 'node:crypto';
import { z } from 'zod';
import type { Sql, Tx } from '../db.js';
import type { Deps } from '../deps.js';
import { fail, ok, type Failure, type Result } from '../errors.js';
import { derivedId } from '../ids.js';
import { systemEvent, systemEventType } from '../ledger/event-types.js';
import { getAdapter } from '../platforms/registry.js';
import { isPlatformName } from '../platforms/types.js';
import { enqueue, type LedgerEvent } from '../queues.js';
import { deleteInBatches } from '../retention/batched-delete.js';
import type { GuessThrottle } from './link-code-throttle.js';
import { inRetriedTransaction, lockUsers, mergedEvent, mergeInTransaction, type MergeRecord } from './merge.js';
import { getPlatformUser, getUser, isoOf } from './users.js';

/**
 * Link codes: a short single-use code an application hands to one of its users, which links
 * whatever platform account sends it back to that user (merging the two users).
 *
 * The alphabet leaves out look-alikes (0/O, 1/I/L), so a code read off a screen and typed on
 * a phone survives; 8 symbols of 31 carry 8·log2(31) ≈ 39.6 bits, and with the guessing
 * throttle a brute force over a 10-minute lifetime has no practical chance.
 */
export const CODE_ALPHABET = '23456789ABCDEFGHJKMNPQRSTUVWXYZ';
const CODE_LENGTH = 8;
const DEFAULT_TTL_SECONDS = 600;
const MAX_TTL_SECONDS = 86_400;

const CODE_RE = new RegExp(`^[${CODE_ALPHABET}]{${CODE_LENGTH}}$`);

export const createLinkCodeInput = z.strictObject({
  user_id: z.string().min(1).max(100),
  /** Lifetime in seconds. @default 600 */
  ttl_seconds: z.number().int().min(30).max(MAX_TTL_SECONDS).default(DEFAULT_TTL_SECONDS),
});
export type CreateLinkCodeInput = z.infer<typeof createLinkCodeInput>;

export const activateLinkCodeInput = z.strictObject({ platform_user_id: z.string().min(1).max(100) });

export interface DeepLink {
  platform: string;
  platform_connection_id: string;
  url: string;
}

export interface LinkCodeView {
  id: string;
  code: string;
  user_id: string;
  expires_at: string;
  deep_links: DeepLink[];
  created_at: string;
}

export interface Activation {
  link_code_id: string;
  /** The user the code was for (its survivor, if it was merged since): the platform user's user now. */
  user_id: string;
  platform_user_id: string;
  /** The user that was merged into `user_id` by this activation; null when already linked. */
  merged_user_id: string | null;
  /** True when this platform user had already activated this code (a repeat answers the same). */
  replayed: boolean;
}

function generateCode(): string {
  let code = '';
  for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}

/**
 * What a person may type for a code: any case, surrounding blanks, and one separator after
 * the 4th symbol (`k7qm-4xpd`). Anything else is not a code (undefined).
 */
export function normaliseCode(text: string): string | undefined {
  const t = text.trim().toUpperCase();
  const joined = /^[A-Z0-9]{4}[ -][A-Z0-9]{4}$/.test(t) ? t.slice(0, 4) + t.slice(5) : t;
  return CODE_RE.test(joined) ? joined : undefined;
}

/** Codes are stored as a hash scoped by application: the table alone links nobody. */
const hashCode = (appId: string, code: string) => createHash('sha256').update(`${appId}:${code}`).digest();

const generatedEventId = (codeId: string) => derivedId(codeId, systemEventType('link_code.generated'));
const activationEventId = (codeId: string) => derivedId(codeId, systemEventType('link_code.activation'));

/**
 * Ready-made links per active connection where the platform has them (its adapter's
 * `deepLink`). They need the account's public handle, which only the connection config can
 * give; without it the platform gets no link and the user types the code instead.
 */
export function deepLinksFor(conns: { id: string; platform: string; config_public: Record<string, unknown> }[], code: string): DeepLink[] {
  const links: DeepLink[] = [];
  for (const c of conns) {
    const url = isPlatformName(c.platform) ? getAdapter(c.platform).deepLink.url(c.config_public ?? {}, code) : undefined;
    if (url) links.push({ platform: c.platform.toLowerCase(), platform_connection_id: c.id, url });
  }
  return links;
}

/**
 * Creates a code for a live user and records `link_code.generated` (its payload names the
 * code's id, never the code: event consumers must not be able to link themselves).
 */
export async function createLinkCode(deps: Deps, appId: string, input: CreateLinkCodeInput): Promise<Result<LinkCodeView>> {
  const user = await getUser(deps.sql, appId, input.user_id);
  if (!user.ok) return { ok: false, error: atPath(user.error, ['user_id']) };
  if (user.value.is_system)
    return fail('CONFLICT', 'A user standing for a connected account cannot be linked', [{ path: ['user_id'], message: 'system user' }]);

  let code = '';
  let row: { id: string; expires_at: string; created_at: string } | undefined;
  // 31^8 codes per application: a collision is astronomically rare, but a retry costs nothing.
  for (let attempt = 0; !row && attempt < 5; attempt++) {
    code = generateCode();
    [row] = await deps.sql<{ id: string; expires_at: string; created_at: string }[]>`
      INSERT INTO link_codes (app_id, code_hash, user_id, expires_at)
      VALUES (${appId}, ${hashCode(appId, code)}, ${user.value.id}, now() + ${input.ttl_seconds} * interval '1 second')
      ON CONFLICT (app_id, code_hash) DO NOTHING
      RETURNING id, ${deps.sql.unsafe(isoOf('expires_at'))} AS expires_at, ${deps.sql.unsafe(isoOf('created_at'))} AS created_at`;
  }
  if (!row) throw new Error('could not allocate a unique link code');

  const conns = await deps.sql<{ id: string; platform: string; config_public: Record<string, unknown> }[]>`
    SELECT id, platform, config_public FROM platform_connections WHERE app_id = ${appId} AND status = 'ACTIVE' ORDER BY created_at, id`;
  await enqueue(deps.queues, 'ledger', {
    event: {
      id: generatedEventId(row.id),
      app_id: appId,
      ...systemEvent('link_code.generated', { link_code_id: row.id, user_id: user.value.id, expires_at: row.expires_at }),
      edges: [],
      attachments: [],
    },
  });
  return ok({
    id: row.id,
    code,
    user_id: user.value.id,
    expires_at: row.expires_at,
    deep_links: deepLinksFor(conns, code),
    created_at: row.created_at,
  });
}

function atPath(f: Failure, path: (string | number)[]): Failure {
  return f.details?.length ? { ...f, details: f.details.map((d) => ({ ...d, path })) } : f;
}

interface CodeRow {
  id: string;
  user_id: string;
  expired: boolean;
  used_at: Date | null;
  used_by_platform_user_id: string | null;
  result_user_id: string | null;
  merged_user_id: string | null;
}

type Outcome = { activation: Activation; merge: MergeRecord | null };

/**
 * Uses a code for a platform user (POST /v1/link-codes/:code/activate, or an inbound message
 * carrying it). In one transaction: the code is locked, checked (unknown, expired, used) and
 * marked used, and — when the platform user belongs to another user than the code's — that
 * user is merged into the code's user. Then `user.merged` (when users merged) and
 * `link_code.activation` are recorded under ids derived from the code, so a repeat by the same
 * platform user (a retried job) answers the same and records nothing twice.
 */
export async function activateLinkCode(
  deps: Deps,
  throttle: GuessThrottle,
  appId: string,
  p: { code: string; platformUserId: string; via: 'api' | 'inbound' },
): Promise<Result<Activation>> {
  const code = normaliseCode(p.code);
  if (!code)
    return fail('VALIDATION_ERROR', `A link code is ${CODE_LENGTH} characters of ${CODE_ALPHABET}`, [
      { path: ['code'], message: 'malformed' },
    ]);
  const pu = await getPlatformUser(deps.sql, appId, p.platformUserId);
  if (!pu) return fail('NOT_FOUND', `No platform user ${p.platformUserId}`, [{ path: ['platform_user_id'], message: 'not found' }]);
  if (pu.is_system_user)
    return fail('CONFLICT', 'A connected account itself cannot use a link code', [{ path: ['platform_user_id'], message: 'system user' }]);

  const charged = await throttle.charge(appId, pu.id);
  if (!charged.ok) return charged;

  const result = await inRetriedTransaction(deps.sql, (tx) => useCode(tx, appId, code, pu.id, p.via));
  if (!result.ok) return result;
  await throttle.refund(appId, pu.id);
  const { activation, merge } = result.value;
  if (merge) await enqueue(deps.queues, 'ledger', { event: mergedEvent(merge) });
  await enqueue(deps.queues, 'ledger', { event: activationEvent(appId, activation, p.via) });
  return ok(activation);
}

function activationEvent(appId: string, a: Activation, via: 'api' | 'inbound'): LedgerEvent {
  return {
    id: activationEventId(a.link_code_id),
    app_id: appId,
    ...systemEvent('link_code.activation', {
      link_code_id: a.link_code_id,
      user_id: a.user_id,
      platform_user_id: a.platform_user_id,
      merged_user_id: a.merged_user_id,
      via,
    }),
    edges: [{ edge_type: 'activated_by', target_node_type: 'platform_user', target_node_id: a.platform_user_id }],
    attachments: [],
  };
}

async function useCode(tx: Tx, appId: string, code: string, puId: string, via: 'api' | 'inbound'): Promise<Result<Outcome>> {
  const [row] = await tx<CodeRow[]>`
    SELECT id, user_id, expires_at <= now() AS expired, used_at, used_by_platform_user_id, result_user_id, merged_user_id
      FROM link_codes WHERE app_id = ${appId} AND code_hash = ${hashCode(appId, code)}
       FOR UPDATE`;
  if (!row) return fail('LINK_CODE_NOT_FOUND', 'Unknown link code', [{ path: ['code'], message: 'not found' }]);
  if (row.used_at) {
    if (row.used_by_platform_user_id === puId && row.result_user_id) {
      const merge = row.merged_user_id ? await recordedMerge(tx, appId, row.merged_user_id) : null;
      return ok({
        activation: {
          link_code_id: row.id,
          user_id: row.result_user_id,
          platform_user_id: puId,
          merged_user_id: row.merged_user_id,
          replayed: true,
        },
        merge,
      });
    }
    return fail('LINK_CODE_USED', 'This link code has already been used', [{ path: ['code'], message: 'used' }]);
  }
  if (row.expired)
    return fail('LINK_CODE_EXPIRED', 'This link code has expired; generate a new one', [{ path: ['code'], message: 'expired' }]);

  // A concurrent merge can move the platform user, or merge the code's user away, between our
  // reads; after locking both users we re-read, and go round again if anything moved.
  for (let round = 0; round < 5; round++) {
    const owner = await resolve(tx, appId, row.user_id);
    if (!owner)
      return fail('LINK_CODE_NOT_FOUND', 'The user of this link code no longer exists', [{ path: ['code'], message: 'user gone' }]);
    const current = await userOf(tx, appId, puId);
    if (current === owner) return ok({ activation: await markUsed(tx, appId, row.id, owner, puId, null, via), merge: null });
    await lockUsers(tx, appId, [owner, current]);
    if ((await resolve(tx, appId, row.user_id)) !== owner || (await userOf(tx, appId, puId)) !== current) continue;
    const merged = await mergeInTransaction(tx, appId, { targetUserId: owner, sourceUserId: current, linkCodeId: row.id });
    if (!merged.ok) return merged;
    return ok({ activation: await markUsed(tx, appId, row.id, owner, puId, current, via), merge: merged.value });
  }
  throw Object.assign(new Error('link activation kept racing concurrent merges'), { code: '40001' });
}

async function resolve(tx: Tx, appId: string, id: string): Promise<string | null> {
  const [r] = await tx<{ id: string | null }[]>`SELECT resolve_user_id(${appId}, ${id}) AS id`;
  return r?.id ?? null;
}

async function userOf(tx: Tx, appId: string, puId: string): Promise<string> {
  const [r] = await tx<{ user_id: string }[]>`SELECT user_id FROM platform_users WHERE app_id = ${appId} AND id = ${puId}`;
  return r.user_id;
}

async function markUsed(
  tx: Tx,
  appId: string,
  codeId: string,
  owner: string,
  puId: string,
  mergedUserId: string | null,
  via: 'api' | 'inbound',
): Promise<Activation> {
  await tx`
    UPDATE link_codes SET used_at = now(), used_by_platform_user_id = ${puId}, result_user_id = ${owner},
           merged_user_id = ${mergedUserId}, via = ${via}
     WHERE app_id = ${appId} AND id = ${codeId}`;
  return { link_code_id: codeId, user_id: owner, platform_user_id: puId, merged_user_id: mergedUserId, replayed: false };
}

async function recordedMerge(sql: Sql | Tx, appId: string, sourceUserId: string): Promise<MergeRecord | null> {
  const [m] = await sql<{ target_user_id: string; platform_user_ids: string[]; event_id: string; link_code_id: string | null }[]>`
    SELECT target_user_id, platform_user_ids, event_id, link_code_id FROM user_merges WHERE app_id = ${appId} AND source_user_id = ${sourceUserId}`;
  return m
    ? {
        appId,
        targetUserId: m.target_user_id,
        sourceUserId,
        platformUserIds: m.platform_user_ids,
        eventId: m.event_id,
        linkCodeId: m.link_code_id,
        replayed: true,
      }
    : null;
}

/** What an inbound message did about link codes; never an error (the message is recorded either way). */
export type InboundActivation =
  | { status: 'not_a_code' }
  | { status: 'linked'; activation: Activation }
  | { status: 'refused'; code: Failure['code']; message: string };

/**
 * The inbound half of linking, called by the inbound worker right after the sender's platform
 * user is upserted: when the message is exactly a code (or, on Telegram, `/start <code>` — what
 * a t.me deep link sends), the code is activated for the sender. Wrong, expired, used and
 * throttled codes are answered as values: the inbound message is recorded as usual regardless.
 * Faults (database, Redis) throw, so the job retries — and a retry replays, never re-links.
 */
export async function activateFromInbound(
  deps: Deps,
  throttle: GuessThrottle,
  p: { appId: string; platformUserId: string; text: string | null | undefined; platform: string },
): Promise<InboundActivation> {
  const candidate = codeInMessage(p.platform, p.text ?? '');
  if (!candidate) return { status: 'not_a_code' };
  const r = await activateLinkCode(deps, throttle, p.appId, { code: candidate, platformUserId: p.platformUserId, via: 'inbound' });
  if (r.ok) return { status: 'linked', activation: r.value };
  deps.logger.info({ appId: p.appId, platformUserId: p.platformUserId, code: r.error.code }, 'inbound link code refused');
  return { status: 'refused', code: r.error.code, message: r.error.message };
}

/**
 * The code a message carries, if it is nothing but a code or what the platform's followed
 * deep link sends (Telegram's `/start <code>`).
 */
export function codeInMessage(platform: string, text: string): string | undefined {
  if (text.length > 64) return undefined;
  const name = platform.toUpperCase();
  const linked = isPlatformName(name) ? getAdapter(name).deepLink.codeIn?.(text) : undefined;
  return normaliseCode(linked ?? text);
}

/**
 * Deletes codes that expired more than `days` ago (LINK_CODE_RETENTION_DAYS), in bounded
 * chunks. Until then a used code still answers a repeated activation as the first one did,
 * and an expired one answers LINK_CODE_EXPIRED; after, either is LINK_CODE_NOT_FOUND.
 */
export async function pruneLinkCodes(sql: Sql, days: number): Promise<number> {
  return deleteInBatches(
    async (limit) =>
      (
        await sql`
    DELETE FROM link_codes WHERE (app_id, id) IN (
      SELECT app_id, id FROM link_codes WHERE expires_at < now() - ${days} * interval '1 day' LIMIT ${limit})`
      ).count,
  );
}
