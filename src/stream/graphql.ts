import type { Response } from 'express';
import { AppError, unwrap } from '../errors.js';
import type { GqlContext } from '../graphql/context.js';
import type { GraphqlModule } from '../graphql/schema.js';
import { zodDetails } from '../http/zod-details.js';
import { decodeCursor } from '../ledger/cursor.js';
import type { Principal } from '../auth/api-keys.js';
import type { Sql } from '../db.js';
import type { Logger } from '../logger.js';
import { streamFilterSchema, type StreamFilter } from './filter.js';
import { startReader, type Reader, type StreamStart } from './reader.js';
import type { StreamEndReason } from './revoked-keys.js';
import type { StreamService } from './service.js';
import type { TailEvent } from './tail.js';

interface EventStreamArgs {
  eventTypes?: string[] | null;
  userId?: string | null;
  conversationId?: string | null;
  channels?: string[] | null;
  after?: string | null;
}

/**
 * The last item of a subscription whose API key was revoked: it resolves to an UNAUTHORIZED
 * error (a `next` with `errors`), then the subscription completes, so the client learns why
 * instead of resubscribing with the dead key.
 */
const KEY_REVOKED = Symbol('api key revoked');

/** Catch-up waits for the consumer once this many events are queued. */
const CATCH_UP_QUEUE = 100;

export interface IteratorLimits {
  maxMs: number;
  bufferBytes: number;
}

/**
 * The subscription's events as an async iterator fed by the same reader as the SSE endpoint.
 * graphql-sse pulls the next event only once the previous one is written, so a slow client
 * makes events queue here; past `bufferBytes` the connection is dropped (`onOverflow`) and the
 * client resumes with `after`. Ends cleanly after `maxMs` or on shutdown.
 */
function eventIterator(
  sql: Sql,
  streams: StreamService,
  logger: Logger,
  limits: IteratorLimits,
  principal: Pick<Principal, 'appId' | 'keyId' | 'expiresAt'>,
  filter: StreamFilter,
  start: StreamStart,
  onOverflow: () => void,
): AsyncIterableIterator<TailEvent | typeof KEY_REVOKED> {
  const queue: TailEvent[] = [];
  let queuedBytes = 0;
  let lastBatch = -1;
  let done = false;
  let failure: AppError | undefined;
  let revoked = false;
  let reader: Reader | undefined;
  let taker: (() => void) | undefined;
  let spaceWaiter: (() => void) | undefined;

  const wakeTaker = () => {
    const t = taker;
    taker = undefined;
    t?.();
  };
  const finish = (reason?: StreamEndReason) => {
    if (done) return;
    done = true;
    revoked = reason === 'revoked';
    clearTimeout(maxTimer);
    untrack();
    reader?.close();
    queue.length = 0;
    spaceWaiter?.();
    wakeTaker();
  };
  const enqueue = (e: TailEvent) => {
    queue.push(e);
    queuedBytes += e.frame.length;
    wakeTaker();
  };

  const maxTimer = setTimeout(finish, limits.maxMs);
  const untrack = streams.track(principal, finish);

  startReader(sql, streams.tails, principal.appId, filter, start, {
    get closed() {
      return done;
    },
    async send(e) {
      if (done) return;
      enqueue(e);
      while (!done && queue.length >= CATCH_UP_QUEUE) await new Promise<void>((r) => (spaceWaiter = r));
    },
    push(e) {
      if (done) return;
      // Judged once per tail batch, like the SSE endpoint: the backlog left from earlier batches.
      if (e.batch !== lastBatch) {
        lastBatch = e.batch;
        if (queuedBytes > limits.bufferBytes) {
          finish();
          onOverflow();
          return;
        }
      }
      enqueue(e);
    },
  }).then(
    (r) => {
      reader = r;
      if (done) r.close();
    },
    (err) => {
      logger.warn({ err }, 'event subscription read failed; the client resumes with `after`');
      failure = new AppError(
        'UNAVAILABLE',
        'The event stream was interrupted; resubscribe with `after` set to the last cursor',
        undefined,
        { cause: err },
      );
      finish();
    },
  );

  const iterator: AsyncIterableIterator<TailEvent | typeof KEY_REVOKED> = {
    [Symbol.asyncIterator]() {
      return iterator;
    },
    async next() {
      for (;;) {
        const e = queue.shift();
        if (e) {
          queuedBytes -= e.frame.length;
          if (queue.length < CATCH_UP_QUEUE / 2) {
            const s = spaceWaiter;
            spaceWaiter = undefined;
            s?.();
          }
          return { value: e, done: false };
        }
        if (done) {
          if (failure) throw failure;
          if (revoked) {
            revoked = false;
            return { value: KEY_REVOKED, done: false };
          }
          return { value: undefined, done: true };
        }
        await new Promise<void>((r) => (taker = r));
      }
    },
    async return() {
      finish();
      return { value: undefined, done: true };
    },
  };
  return iterator;
}

export const eventStreamModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    type Subscription {
      """
      Events of the application as they are committed, filters combined with AND. Live by
      default; with \`after\` (an event's \`cursor\`) every matching event strictly after it is
      sent first, in order and exactly once, then live. \`eventTypes\` are patterns (an exact type,
      \`prefix.*\`, \`*\`) matched against each event's stored type and its other name, such as
      \`message.read\` for a read \`message.status\`; \`eventType\` is always the stored type.
      \`channels\`: events carrying any of them.
      """
      eventStream(eventTypes: [String!], userId: ID, conversationId: ID, channels: [String!], after: String): Event!
    }
  `,
  resolvers: {
    Subscription: {
      eventStream: {
        subscribe: async (_root: unknown, args: EventStreamArgs, ctx: GqlContext) => {
          const principal = ctx.need('events:read');
          const parsed = streamFilterSchema.safeParse({
            eventTypes: args.eventTypes ?? undefined,
            userId: args.userId ?? undefined,
            conversationId: args.conversationId ?? undefined,
            channels: args.channels ?? undefined,
          });
          if (!parsed.success)
            throw new AppError('VALIDATION_ERROR', parsed.error.issues[0]?.message ?? 'Invalid filter', zodDetails(parsed.error));
          const start: StreamStart = args.after ? { afterSeq: unwrap(decodeCursor(args.after)).seq } : { live: true };
          const { config } = ctx.deps;
          const res = ctx.res as Response | undefined;
          return eventIterator(
            ctx.deps.sql,
            ctx.web.streams,
            ctx.deps.logger,
            { maxMs: config.STREAM_MAX_MS, bufferBytes: config.STREAM_BUFFER_BYTES },
            principal,
            { ...parsed.data, scope: principal.eventScope },
            start,
            () => res?.destroy(),
          );
        },
        resolve: (event: TailEvent | typeof KEY_REVOKED) => {
          if (event === KEY_REVOKED) throw new AppError('UNAUTHORIZED', 'The API key was revoked, or the portal session ended');
          return event.node;
        },
      },
    },
  },
};
