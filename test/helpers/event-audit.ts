import { z } from 'zod';
import type { Sql } from '../../src/db.js';
import { isSystemEventType, RESERVED_PREFIXES, SYSTEM_EVENTS } from '../../src/ledger/event-types.js';

/** Types the service stores; `webhook.test` is only delivered, and a client may post a custom event by that name. */
const STORED = Object.entries(SYSTEM_EVENTS).flatMap(([type, def]) => (def.stored === false ? [] : [type]));

/**
 * The stored events that break the event catalog, one line each: a system type whose payload
 * does not parse against its schema, or a type under a reserved prefix that the catalog does
 * not know (only the service writes those, and only through the catalog).
 */
export async function offCatalogEvents(sql: Sql): Promise<string[]> {
  const rows = await sql<{ id: string; event_type: string; payload: unknown }[]>`
    SELECT id, event_type, payload FROM events
     WHERE event_type LIKE ANY(${RESERVED_PREFIXES.map((p) => `${p.replace(/_/g, '\\_')}%`)}) OR event_type = ANY(${STORED})
     ORDER BY app_id, seq`;
  return rows.flatMap((r) => {
    if (!isSystemEventType(r.event_type)) return [`${r.event_type} ${r.id}: not a type of the catalog (src/ledger/event-types.ts)`];
    const parsed = SYSTEM_EVENTS[r.event_type].payload.safeParse(r.payload);
    return parsed.success
      ? []
      : [`${r.event_type} ${r.id}: ${z.prettifyError(parsed.error).replace(/\n/g, '; ')}\n  payload: ${JSON.stringify(r.payload)}`];
  });
}
