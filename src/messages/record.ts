import { randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';
import { catalogJob, enqueueBulk } from '../queues.js';
import { tickBatch } from '../tick-batch.js';
import { ownSendJob } from './delivery.js';

/** One accepted send, as the web process records it. */
export interface NewMessage {
  id: string;
  appId: string;
  connectionId: string;
  to: string;
  text: string;
  options: { parse_mode?: 'MarkdownV2' | 'HTML'; subject?: string };
  fileIds: string[];
  /**
   * Sent by its own job from the start: it must wait for what a batch job would hand it over
   * for anyway (its files uploaded first, an e-mail's thread looked up).
   */
  alone?: boolean;
}

/** Records a send (with the others of its event-loop turn) and hands it to the send workers; resolves with its created_at. */
export type MessageRecorder = (m: NewMessage) => Promise<Date>;

/** The most sends one statement and one batch job carry. */
const RECORD_BATCH_MAX = 200;

/**
 * The sends accepted during one turn of the event loop are recorded by one statement and go
 * to the workers as one `send` batch job, whose worker answers this process (`replyTo`)
 * directly when each settles (a send that cannot take the batch's fast path, `alone`, gets its
 * own job, queued with the batch job). While one batch is being recorded, the next turns' sends
 * gather for the next (under load, batches grow on their own; when idle, each goes at once).
 *
 * Each recipient's sequence numbers are handed out in arrival order under its counter row's
 * lock, which the statement holds until it commits: sequence order is commit order for each
 * recipient, as when each send was recorded alone. A send naming a connection deleted behind
 * the cache fails the statement (foreign key); the batch is then split until that send is alone.
 */
export function createMessageRecorder(deps: Deps, replyTo: string): MessageRecorder {
  return tickBatch<NewMessage, Date>(
    async (batch) => {
      const input = JSON.stringify(
        batch.map((m, i) => ({
          ord: i + 1,
          id: m.id,
          app_id: m.appId,
          conn: m.connectionId,
          to_id: m.to,
          body: m.text,
          options: m.options,
          file_ids: m.fileIds,
        })),
      );
      const rows = await deps.sql<{ id: string; created_at: Date }[]>`
        WITH input AS (
          SELECT * FROM jsonb_to_recordset(${input}::text::jsonb)
            AS r(ord int, id uuid, app_id uuid, conn uuid, to_id text, body text, options jsonb, file_ids uuid[])
        ), counts AS (
          SELECT app_id, conn, to_id, count(*) AS n FROM input GROUP BY app_id, conn, to_id
        ), counter AS (
          INSERT INTO recipient_counters (app_id, platform_connection_id, to_external_id, seq)
          SELECT app_id, conn, to_id, n FROM counts ORDER BY app_id, conn, to_id
          ON CONFLICT (app_id, platform_connection_id, to_external_id) DO UPDATE SET seq = recipient_counters.seq + EXCLUDED.seq
          RETURNING platform_connection_id, to_external_id, seq
        )
        INSERT INTO outbound_messages (id, app_id, platform_connection_id, to_external_id, recipient_seq, text, options, file_ids)
        SELECT i.id, i.app_id, i.conn, i.to_id,
               c.seq - k.n + row_number() OVER (PARTITION BY i.conn, i.to_id ORDER BY i.ord),
               i.body, i.options, i.file_ids
          FROM input i
          JOIN counts k ON k.conn = i.conn AND k.to_id = i.to_id
          JOIN counter c ON c.platform_connection_id = i.conn AND c.to_external_id = i.to_id
         ORDER BY i.ord
        ON CONFLICT (app_id, id) DO NOTHING
        RETURNING id, created_at`;
      const created = new Map(rows.map((r) => [r.id, r.created_at]));
      const recorded = batch.filter((m) => created.has(m.id));
      const together = recorded.filter((m) => !m.alone);
      const jobs = [
        ...(together.length
          ? [
              catalogJob('send', {
                kind: 'batch',
                batch_id: randomUUID(),
                messages: together.map((m) => ({ app_id: m.appId, id: m.id })),
                reply_to: replyTo,
              }),
            ]
          : []),
        ...recorded.filter((m) => m.alone).map((m) => ownSendJob({ id: m.id, app_id: m.appId }, replyTo)),
      ];
      if (jobs.length) await enqueueBulk(deps.queues, 'send', jobs);
      // An id already recorded — by a concurrent request replaying the same Idempotency-Key —
      // keeps its row and its job; this caller only waits for its outcome.
      return batch.map((m) => created.get(m.id) ?? new Date());
    },
    { maxBatch: RECORD_BATCH_MAX, serial: true },
  );
}
