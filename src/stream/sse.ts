import type { Response } from 'express';
import type { Principal } from '../auth/api-keys.js';
import type { Sql } from '../db.js';
import { unwrap } from '../errors.js';
import { decodeCursor } from '../ledger/cursor.js';
import type { Api } from '../http/api.js';
import { LAST_EVENT_ID } from '../http/openapi.js';
import type { RouteContext } from '../http/routes.js';
import type { Logger } from '../logger.js';
import { streamQuerySchema, type StreamFilter } from './filter.js';
import { startReader, type Reader, type StreamSink, type StreamStart } from './reader.js';
import type { TailEvent } from './tail.js';
import type { StreamEndReason } from './revoked-keys.js';
import { holdStreamSlot, type StreamService } from './service.js';

export interface SseLimits {
  /** Interval of `: keep-alive` comments (ms). */
  keepAliveMs: number;
  /** A stream ends cleanly after this long; the client resumes by cursor (ms). */
  maxMs: number;
  /** Bytes queued for a client before it is disconnected. */
  bufferBytes: number;
}

const KEEP_ALIVE = ': keep-alive\n\n';
/** The last frame of a stream whose API key was revoked: the error body REST answers with. */
const REVOKED_FRAME = `event: error\ndata: ${JSON.stringify({ error: { code: 'UNAUTHORIZED', message: 'The API key was revoked, or the portal session ended' } })}\n\n`;

/** GET /events/stream (docs/guide.md, streams): auth and validation answer as JSON; only then does a stream start. */
export function registerStreamRoutes(api: Api, { deps, web, onShutdown }: RouteContext): void {
  const { config } = deps;
  const limits: SseLimits = {
    keepAliveMs: config.STREAM_KEEPALIVE_MS,
    maxMs: config.STREAM_MAX_MS,
    bufferBytes: config.STREAM_BUFFER_BYTES,
  };
  // Ends every open stream, GraphQL subscriptions included, so clients reconnect elsewhere.
  onShutdown.push(() => web.streams.close());

  api.route({
    method: 'get',
    path: '/events/stream',
    operationId: 'streamEvents',
    description:
      "Server-Sent Events: each ledger event as a `data:` frame whose `id:` is its cursor, live as it commits. Reconnect with Last-Event-ID (or `?lastEventId=`) to receive every matching event after it exactly once, in order, then live ones. Filters as for GET /v1/events. Frames name fields in camelCase (eventType, appId…) where REST uses snake_case: the guide's field-names table maps one to the other.",
    summary: 'Server-Sent Events stream of the ledger, resumable with Last-Event-ID (or ?lastEventId=)',
    scope: 'events:read',
    appIdRequired: false,
    rateLimited: false,
    query: streamQuerySchema,
    headers: [LAST_EVENT_ID],
    responses: {
      200: {
        description:
          'An open stream: frames `id: <cursor>` / `data: <event JSON>`, and `: keep-alive` comments. The event in `data:` ' +
          'has the camelCase field names of a GraphQL `events` node (`eventType`, `createdAt`, `appId`), not the snake_case ' +
          'of REST bodies (`event_type`, `created_at`, `app_id`).',
        mediaType: 'text/event-stream',
      },
    },
    errors: ['INVALID_CURSOR', 'TOO_MANY_STREAMS', 'UNAVAILABLE'],
    async handler({ req, res, principal, query }) {
      const cursor = req.get('last-event-id') || query.lastEventId;
      const start: StreamStart = cursor ? { afterSeq: unwrap(decodeCursor(cursor)).seq } : { backfill: config.STREAM_BACKFILL };
      await holdStreamSlot(web.streams, principal.appId, res);
      const log = (req as { log?: Logger }).log ?? deps.logger;
      serveSse(res, deps.sql, web.streams, log, limits, principal, { ...query.filter, scope: principal.eventScope }, start);
      return undefined;
    },
  });
}

/**
 * Writes one stream. Catch-up writes wait for the socket to drain; live events are written
 * at once, and a client whose unsent bytes pass `bufferBytes` is disconnected rather than
 * holding the tail back or growing memory — it reconnects with its last cursor.
 */
function serveSse(
  res: Response,
  sql: Sql,
  streams: StreamService,
  logger: Logger,
  limits: SseLimits,
  principal: Pick<Principal, 'appId' | 'keyId' | 'expiresAt'>,
  filter: StreamFilter,
  start: StreamStart,
): void {
  // The body ends with the connection (Connection: close), so it needs no chunked framing.
  res.useChunkedEncodingByDefault = false;
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    // The socket closes with the stream, so a stream ended on shutdown frees its connection.
    Connection: 'close',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  // With the head sent and no framing, body bytes go straight to the socket: one write of the
  // bytes every stream shares, without ServerResponse's per-write cork/uncork round — the
  // difference between fan-out at 1,000 streams costing a fraction of a core or most of one.
  const socket = res.socket;
  if (!socket) return void res.end();

  let closed = false;
  let lastBatch = -1;
  /** What `push` took from the current tail batch; `flush` writes it out. */
  const taken: TailEvent[] = [];
  let reader: Reader | undefined;
  const cleanup = () => {
    closed = true;
    clearInterval(keepAlive);
    clearTimeout(maxTimer);
    reader?.close();
    untrack();
  };
  const end = (reason?: StreamEndReason) => {
    if (closed) return;
    cleanup();
    // A revoked key's stream says why before it closes, so the client does not just reconnect.
    if (reason === 'revoked') write(REVOKED_FRAME);
    res.end();
  };
  const drop = () => {
    if (closed) return;
    cleanup();
    res.destroy();
  };
  res.once('close', cleanup);
  res.on('error', () => undefined);

  const write = (bytes: Buffer | string) => !socket.destroyed && socket.write(bytes);
  const overfull = () => socket.writableLength > limits.bufferBytes;
  const sink: StreamSink = {
    get closed() {
      return closed;
    },
    async send(event) {
      if (closed) return;
      // Catch-up goes at the client's pace: wait for the socket to drain, holding one page at most.
      if (write(event.bytes) || closed) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          socket.off('drain', done);
          res.off('close', done);
          resolve();
        };
        socket.on('drain', done);
        res.on('close', done);
      });
    },
    push(event) {
      if (closed) return;
      // The backlog is judged once per tail batch, before writing it: what the client has not
      // taken since the previous batch. A batch itself may be large; it is bounded by the page size.
      if (event.batch !== lastBatch) {
        lastBatch = event.batch;
        if (overfull()) return drop();
      }
      taken.push(event);
    },
    flush() {
      if (taken.length === 0) return;
      if (closed) return void (taken.length = 0);
      // One write per stream per batch: at 1,000 streams, fan-out costs what the syscalls cost.
      const first = taken[0];
      const group = first.group;
      if (taken.length === 1) write(first.bytes);
      // The whole batch (a stream without a filter): its frames joined once for every such stream.
      else if (group && taken.length === group.events.length && taken.at(-1)!.group === group) write(group.bytes);
      else {
        socket.cork();
        for (const e of taken) write(e.bytes);
        socket.uncork();
      }
      taken.length = 0;
    },
  };

  const keepAlive = setInterval(() => {
    if (closed) return;
    write(KEEP_ALIVE);
    if (overfull()) drop();
  }, limits.keepAliveMs);
  const maxTimer = setTimeout(end, limits.maxMs);
  const untrack = streams.track(principal, end);

  startReader(sql, streams.tails, principal.appId, filter, start, sink).then(
    (r) => {
      reader = r;
      if (closed) r.close();
    },
    (err) => {
      logger.warn({ err }, 'event stream read failed; ending the stream so the client resumes by cursor');
      end();
    },
  );
}
