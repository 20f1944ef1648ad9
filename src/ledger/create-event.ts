import { z } from 'zod';
import type { Deps } from '../deps.js';
import type { ChangeStamps } from '../change-stamps.js';
import { fail, ok, type ErrorDetail, type Result } from '../errors.js';
import { claimIdempotencyKey } from '../idempotency.js';
import { storableText } from '../storable-text.js';
import type { LedgerEvent } from '../queues.js';
import { encodeCursor } from './cursor.js';
import { channelsSchema } from './event-scope.js';
import { checkPayload, EVENT_TYPE_RE } from './event-schemas.js';
import { RESERVED_PREFIXES } from './event-types.js';
import { getEvent, type EdgeRecord, type EventRecord } from './read.js';
import type { LedgerSubmitter } from './submit.js';

export const createEventInput = z.strictObject({
  event_type: z.string().min(1).max(200).regex(EVENT_TYPE_RE, 'must match ^[a-z0-9_.]+$'),
  payload: z.record(z.string(), z.unknown()).default({}),
  edges: z
    .array(
      z.strictObject({
        edge_type: z.string().min(1).max(100),
        target_node_type: z.enum(['platform_user', 'file']),
        target_node_id: z.string().min(1).max(200),
      }),
    )
    .max(100)
    .default([]),
  origin_event_id: z.string().max(200).nullish(),
  channels: channelsSchema.default([]).describe('tags to select the event by (at most 20, each 1-64 of A-Z a-z 0-9 _ . : @ -)'),
});
export type CreateEventInput = z.infer<typeof createEventInput>;

export type CreateEventOutcome = { committed: true; event: EventRecord } | { committed: false; id: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Validates a custom event against the application's records and schema, enqueues it on the
 * ledger and waits (bounded) for the commit. Nothing is written before validation passes.
 */
export async function createCustomEvent(
  deps: Deps,
  web: { ledger: LedgerSubmitter; stamps: ChangeStamps },
  appId: string,
  input: CreateEventInput,
  idempotencyKey?: string,
): Promise<Result<CreateEventOutcome>> {
  const { sql } = deps;
  if (RESERVED_PREFIXES.some((p) => input.event_type.startsWith(p))) {
    return fail('RESERVED_EVENT_TYPE', `Event type "${input.event_type}" uses a reserved prefix (${RESERVED_PREFIXES.join(', ')})`, [
      { path: ['event_type'], message: 'reserved prefix' },
    ]);
  }

  const bad: ErrorDetail[] = [];
  const wanted = { platform_user: [] as string[], file: [] as string[] };
  input.edges.forEach((e, i) => {
    if (!UUID.test(e.target_node_id))
      bad.push({ path: ['edges', i, 'target_node_id'], message: `${e.target_node_type} ${e.target_node_id} not found` });
    else wanted[e.target_node_type].push(e.target_node_id);
  });
  const [users, files] = await Promise.all([
    wanted.platform_user.length
      ? sql<NonNullable<EdgeRecord['platform_user']>[]>`
          SELECT id, external_id, name, is_system_user, user_id FROM platform_users WHERE app_id = ${appId} AND id = ANY(${wanted.platform_user}::uuid[])`
      : [],
    wanted.file.length ? sql<{ id: string }[]>`SELECT id FROM files WHERE app_id = ${appId} AND id = ANY(${wanted.file}::uuid[])` : [],
  ]);
  const found = new Set([...users, ...files].map((r) => r.id));
  const userById = new Map(users.map((u) => [u.id, u]));
  input.edges.forEach((e, i) => {
    if (UUID.test(e.target_node_id) && !found.has(e.target_node_id)) {
      bad.push({ path: ['edges', i, 'target_node_id'], message: `${e.target_node_type} ${e.target_node_id} not found` });
    }
  });
  if (input.origin_event_id) {
    const origin = UUID.test(input.origin_event_id)
      ? await sql`SELECT 1 FROM events WHERE app_id = ${appId} AND id = ${input.origin_event_id}`
      : [];
    if (origin.length === 0) bad.push({ path: ['origin_event_id'], message: `event ${input.origin_event_id} not found` });
  }
  if (bad.length) return fail('VALIDATION_ERROR', bad.map((b) => b.message).join('; '), bad);

  const checked = await checkPayload(sql, web.stamps, appId, input.event_type, input.payload);
  if (checked.errors && checked.enforced) {
    return fail(
      'VALIDATION_ERROR',
      `Payload does not match the "${input.event_type}" schema: ${checked.errors[0].message}`,
      checked.errors,
    );
  }

  const claim = await claimIdempotencyKey(sql, appId, 'events', idempotencyKey, input);
  if (!claim.ok) return claim;
  const id = claim.value.resourceId;
  if (claim.value.replay) {
    const existing = await getEvent(sql, appId, id);
    if (existing) return ok({ committed: true, event: existing });
  }

  const event: LedgerEvent = {
    id,
    app_id: appId,
    event_type: input.event_type,
    // As the ledger will store it, so the answer built from this copy is the stored event.
    payload: storableText(checked.payload),
    edges: input.edges,
    attachments: [],
    origin_event_id: input.origin_event_id ?? null,
    validation_errors: checked.errors,
    channels: input.channels,
  };
  const position = await web.ledger.submit(event, deps.config.EVENT_WAIT_MS);
  if (!position) return ok({ committed: false, id });
  // Past every check at the door, the database still refused its data (a path the checks missed).
  if ('refused' in position)
    return fail('VALIDATION_ERROR', `The event cannot be stored: ${position.refused}`, [{ path: ['payload'], message: position.refused }]);
  // A replayed key may have raced its first request, whose copy is the one stored: read it.
  // Otherwise the id is this request's own, and the stored event is exactly what it enqueued.
  if (claim.value.replay) {
    const stored = await getEvent(sql, appId, id);
    return stored ? ok({ committed: true, event: stored }) : ok({ committed: false, id });
  }
  return ok({
    committed: true,
    event: {
      id,
      app_id: appId,
      seq: position.seq,
      created_at: position.created_at,
      event_type: event.event_type,
      // A custom type is never under a reserved prefix, so it has no alias.
      event_alias: null,
      channels: input.channels,
      payload: event.payload,
      attachments: [],
      origin_event_id: event.origin_event_id ?? null,
      conversation_id: null,
      platform_connection_id: null,
      validation_errors: event.validation_errors ?? null,
      edges: input.edges.map((e) => ({
        ...e,
        platform_user: e.target_node_type === 'platform_user' ? (userById.get(e.target_node_id) ?? null) : null,
      })),
      cursor: encodeCursor({ seq: position.seq, createdAt: position.created_at, id }),
    },
  });
}
