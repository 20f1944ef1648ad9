import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';

/** Names of the BullMQ queues; stable, Bull Board lists them all. */
export const QUEUE_NAMES = ['inbound', 'send', 'transcription', 'ledger', 'webhook', 'maintenance'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];
/** The queues QUEUE_SHARDS splits by application (docs/SCALING.md, "Queue shards"). */
export const SHARDED_QUEUES = ['ledger', 'webhook', 'send', 'inbound', 'transcription'] as const satisfies readonly QueueName[];
const MAX_QUEUE_SHARDS = 64;

/** A queue a worker process serves: every shard of it, or only those listed. */
export interface WorkerQueue {
  queue: QueueName;
  shards?: number[];
}

/** `2` or `0-2` as shard indexes; null when it is neither. */
function shardRange(range: string): number[] | null {
  const m = /^(\d+)(?:-(\d+))?$/.exec(range);
  if (!m) return null;
  const [from, to] = [Number(m[1]), Number(m[2] ?? m[1])];
  if (to < from || to >= MAX_QUEUE_SHARDS) return null;
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
/** One send budget of PLATFORM_RATE_BUDGETS: `rate` sends per `perMs`, `burst` more at once. */
const rateBudget = z.strictObject({ rate: z.number().positive(), perMs: z.number().int().positive(), burst: z.number().int().min(0) });
const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
const msList = (def: string) =>
  z
    .string()
    .default(def)
    .transform((s, ctx) => {
      const parts = s.split(',').map((p) => Number(p.trim()));
      if (parts.length === 0 || parts.some((n) => !Number.isInteger(n) || n < 0)) {
        ctx.addIssue({ code: 'custom', message: 'expected a comma-separated list of non-negative integers (ms)' });
        return z.NEVER;
      }
      return parts;
    });

/** A PEM file's certificates, read once at startup; a missing or certificate-less file fails the config. */
const pemFile = () =>
  z
    .string()
    .min(1)
    .optional()
    .transform((path, ctx) => {
      if (path === undefined) return undefined;
      try {
        const pem = readFileSync(path, 'utf8');
        if (pem.includes('-----BEGIN CERTIFICATE-----')) return pem;
        ctx.addIssue({ code: 'custom', message: `${path} holds no PEM certificate` });
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `cannot read ${path}: ${(err as Error).message}` });
      }
      return z.NEVER;
    });

/** Address groups express's `trust proxy` knows by name. */
const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

// Development defaults let `npm ci && npm start` run on a fresh machine; production must set them.
const DEV_ADMIN_TOKEN = 'dev-admin-token-change-me';
const DEV_SECRETS_KEY = 'dev-secrets-key-change-me-0123456789abcdef';

const schema = z
  .object({
    NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    /** Base URL the service is reached at from outside; used in webhook URLs and Twilio signatures. */
    PUBLIC_BASE_URL: z.url().optional(),
    /** Where the built developer portal is (its index.html and assets/); default portal/dist in the project. */
    PORTAL_DIST_DIR: z.string().min(1).optional(),
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'expected a postgres:// URL')
      .default('postgres://postgres@127.0.0.1:5432/gateway'),
    /**
     * A streaming replica of DATABASE_URL's database for readers (stream tails, event pages,
     * by-id reads). Unset, they read from DATABASE_URL. What the replica has not replayed yet is
     * read from the primary (docs/SCALING.md, "Read replicas").
     */
    DATABASE_READ_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'expected a postgres:// URL')
      .optional(),
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\//, 'expected a redis:// URL')
      .default('redis://127.0.0.1:6379/0'),
    /**
     * Seed nodes of a Redis Cluster, comma-separated `host:port` (a few are enough; the client
     * learns the rest from them). Set, every connection is a cluster client, REDIS_URL gives
     * only the credentials and TLS, and REDIS_PREFIX must hold a {hash tag} (docs/SCALING.md).
     */
    REDIS_CLUSTER_NODES: hostPorts('seed nodes, e.g. 10.0.0.1:6379,10.0.0.2:6379'),
    /**
     * Redis Sentinels, comma-separated `host:port`: every connection asks them where the master
     * of REDIS_SENTINEL_NAME is, and follows a failover to the new one. Set, REDIS_URL gives only
     * the credentials, TLS and database (docs/SCALING.md).
     */
    REDIS_SENTINELS: hostPorts('sentinels, e.g. 10.0.0.1:26379,10.0.0.2:26379'),
    /** The master group the sentinels watch (`sentinel monitor <name> …`); required with REDIS_SENTINELS. */
    REDIS_SENTINEL_NAME: z.string().trim().min(1).max(200).optional(),
    /** The sentinels' own password (their `requirepass`), when they have one; the master's comes from REDIS_URL. */
    REDIS_SENTINEL_PASSWORD: z.string().min(1).optional(),
    /**
     * Prefix for every Redis key and channel (BullMQ queues, rate limits, stream slots, wakes).
     * It may hold one Redis Cluster hash tag, e.g. `{gw}`: every key then lives in one slot,
     * which BullMQ's multi-key scripts need on a cluster (docs/SCALING.md).
     */
    REDIS_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9_:-]*(\{[A-Za-z0-9_:-]+\}[A-Za-z0-9_:-]*)?$/, 'letters, digits, _ : - and at most one non-empty {hash tag}')
      .min(1)
      .default('gw'),
    /**
     * How many Redis replicas must hold a job a web process enqueued before its client hears it
     * is queued (a 202, an inbound 200): each enqueue then sends WAIT to its queue's master,
     * bounded to 1 s, and answers 503 when they did not confirm. Unset: 1 when the deployment has replicas
     * (asked of Redis at the first enqueue), else 0; 0 turns it off (docs/SCALING.md).
     */
    REDIS_WAIT_REPLICAS: z.coerce.number().int().min(0).max(5).optional(),
    /**
     * Ledger wakes and commit reports over sharded pub/sub (SPUBLISH/SSUBSCRIBE, Redis 7): on a
     * cluster each message then stays on its channel's shard instead of being copied to every
     * node (docs/SCALING.md, "Pub/sub"). Off: classic PUBLISH/SUBSCRIBE.
     */
    REDIS_SHARDED_PUBSUB: bool(false),
    /**
     * How many queues each of `ledger`, `webhook`, `send`, `inbound` and `transcription` is split into, chosen
     * per application (docs/SCALING.md, "Queue shards"). 1 keeps the single queues and their keys.
     */
    QUEUE_SHARDS: z.coerce.number().int().min(1).max(MAX_QUEUE_SHARDS).default(1),
    /**
     * While moving to a new QUEUE_SHARDS: the count before, whose queues workers keep serving
     * (and the CLI and Bull Board keep showing) until they are empty. Producers use only QUEUE_SHARDS.
     */
    QUEUE_SHARDS_PREVIOUS: z.coerce.number().int().min(1).max(MAX_QUEUE_SHARDS).optional(),
    /**
     * Comma-separated queues this worker process serves, or `all`; a sharded queue may name
     * its shards (`ledger:0-2`, `send:1,send:3`). Without shards, every shard of the queue.
     */
    WORKER_QUEUES: z
      .string()
      .default('all')
      .transform((s, ctx): WorkerQueue[] => {
        if (s.trim() === 'all' || s.trim() === '') return QUEUE_NAMES.map((queue) => ({ queue }));
        const picked = new Map<QueueName, WorkerQueue>();
        for (const item of s
          .split(',')
          .map((n) => n.trim())
          .filter(Boolean)) {
          const [name, range] = item.split(':', 2) as [string, string | undefined];
          if (!(QUEUE_NAMES as readonly string[]).includes(name)) {
            ctx.addIssue({ code: 'custom', message: `unknown queue ${name}; expected some of ${QUEUE_NAMES.join(', ')} or all` });
            return z.NEVER;
          }
          const queue = name as QueueName;
          const shards = range === undefined ? undefined : shardRange(range);
          if (shards === null || (shards && !(SHARDED_QUEUES as readonly string[]).includes(queue))) {
            ctx.addIssue({
              code: 'custom',
              message: `bad shards in ${item}; expected e.g. ledger:2 or ledger:0-2 (only ${SHARDED_QUEUES.join(', ')} have shards)`,
            });
            return z.NEVER;
          }
          const before = picked.get(queue);
          // A queue named whole anywhere is served whole.
          const whole = !shards || (before && !before.shards);
          const merged = whole ? undefined : [...new Set([...(before?.shards ?? []), ...shards])].sort((a, b) => a - b);
          picked.set(queue, merged ? { queue, shards: merged } : { queue });
        }
        return [...picked.values()];
      }),
    WORKER_CONCURRENCY: int(16, 1),
    /**
     * How long a job's lock lasts without renewal (ms; BullMQ lockDuration, renewed every quarter
     * of it): a worker killed mid-job has its jobs taken over after about this long plus
     * JOB_STALL_CHECK_MS. A worker whose event loop is held for about three quarters of it (CPU
     * starvation, a long GC pause) loses its jobs to another worker, which runs them again; the
     * trade-off is measured in docs/OPERATIONS.md ("Job locks").
     */
    JOB_LOCK_MS: int(4_000, 1000),
    /** How often one worker looks for active jobs whose lock has lapsed (ms; BullMQ stalledInterval). */
    JOB_STALL_CHECK_MS: int(500, 100),
    /** A job active longer than this (ms) counts as stuck in /metrics (`queue_stuck_jobs`). */
    JOB_STUCK_MS: int(120_000, 1000),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** Guards /admin/queues (Bull Board) and other operator routes. */
    ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    /** Any string of 32+ characters; the AES-256-GCM key for stored secrets is derived from it. */
    SECRETS_KEY: z.string().min(32, 'must be at least 32 characters').optional(),
    RATE_LIMIT_PER_MINUTE: int(100, 1),
    /** GraphQL documents (both endpoints): deepest selection nesting, fragments counted inline. */
    GRAPHQL_MAX_DEPTH: int(10, 1),
    /** GraphQL: aliased fields in one operation, fragments counted at each use. */
    GRAPHQL_MAX_ALIASES: int(30, 0),
    /** GraphQL: directives in one operation. */
    GRAPHQL_MAX_DIRECTIVES: int(50, 0),
    /** GraphQL: lexical tokens in one document; the parser stops past it. */
    GRAPHQL_MAX_TOKENS: int(3000, 100),
    /** GraphQL: estimated cost of one operation (1 per field; a list field multiplies its selection by `first`). */
    GRAPHQL_MAX_COST: int(20_000, 1),
    /** Largest accepted JSON body, in bytes. */
    BODY_LIMIT_BYTES: int(1_048_576, 1024),
    /**
     * How long a client may take to send a request's headers (ms): a client trickling them
     * (slowloris) holds a socket until then, and is answered 408.
     */
    HTTP_HEADERS_TIMEOUT_MS: int(20_000, 100),
    /**
     * How long a client may take to send a whole request, headers and body (ms); 0 = no limit.
     * Node applies it only until the request is received, so it never cuts a long response
     * such as an event stream or a GraphQL subscription. Leaves time for a 50 MB upload.
     */
    HTTP_REQUEST_TIMEOUT_MS: int(120_000, 0),
    /**
     * How long an idle kept-alive connection stays open (ms). Above the 60 s idle timeout of
     * common load balancers, so they never reuse a connection the server is closing.
     */
    HTTP_KEEP_ALIVE_TIMEOUT_MS: int(65_000, 0),
    /** Bound on graceful shutdown before the process is forced down (ms). */
    SHUTDOWN_TIMEOUT_MS: int(10_000, 0),
    /** Create a demo application on `npm start` when none exists. */
    DEMO_APP: bool(true),
    /** How long POST /v1/events waits for the ledger commit before answering 202 (ms). */
    EVENT_WAIT_MS: int(10_000, 0),
    /** Ledger group commit: most events in one transaction. */
    LEDGER_BATCH_MAX: int(500, 1),
    STREAM_BACKFILL: int(10, 0),
    STREAM_RECHECK_MS: int(2000, 10),
    /**
     * Longest a stream tail waits for the read replica to replay an event a wake announced
     * (ms); then it reads that event from the primary.
     */
    REPLICA_WAIT_MS: int(500, 0),
    STREAM_KEEPALIVE_MS: int(15_000, 10),
    STREAM_MAX_MS: int(3_600_000, 100),
    STREAM_MAX_PER_APP: int(100, 1),
    /** Bytes a live stream may have queued for a slow client before it is disconnected (it resumes by cursor). */
    STREAM_BUFFER_BYTES: int(1_048_576, 1024),
    /** Lease on a stream slot in Redis (ms): renewed while the stream is open, reclaimed this long after its process dies. */
    STREAM_SLOT_LEASE_MS: int(30_000, 300),
    /** Deepest nesting of objects/arrays accepted in JSON input (API bodies, GraphQL variables); deeper parts of an acknowledged platform delivery are stored as a marker. */
    JSON_MAX_DEPTH: int(64, 8),
    /** Safety net on one ledger group commit (ms; 0 = none): past it its jobs fail as UNAVAILABLE and retry. */
    LEDGER_WRITE_DEADLINE_MS: int(15_000, 0),
    /**
     * PostgreSQL ends a ledger writer's session left idle inside its transaction this long (ms),
     * so a writer frozen holding an application's head (a GC pause, SIGSTOP, a paused VM) holds
     * it for seconds, not DB_IDLE_IN_TRANSACTION_TIMEOUT_MS; its transaction rolls back and its
     * jobs are retried. A live writer is idle there only between its own round trips.
     */
    LEDGER_IDLE_TIMEOUT_MS: int(2_000, 100),
    /**
     * A ledger writer waiting longer than this for a lock (ms; an application's head held by
     * another writer) gives up its batch, which is retried: its process's group commit is not
     * held by one application's holder. Above LEDGER_IDLE_TIMEOUT_MS, so a writer queued behind a
     * frozen one gets the head when the server ends that one's session, without failing first.
     */
    LEDGER_LOCK_TIMEOUT_MS: int(5_000, 100),
    /** Longest a transaction waits for a free pool connection (ms) before answering UNAVAILABLE. */
    DB_ACQUIRE_TIMEOUT_MS: int(5_000, 1),
    /** PostgreSQL cancels a web process's statement running longer than this (ms; 0 = no limit). */
    DB_STATEMENT_TIMEOUT_MS: int(15_000, 0),
    /** The same for worker processes, whose batches are larger (ms; 0 = no limit). */
    DB_WORKER_STATEMENT_TIMEOUT_MS: int(120_000, 0),
    /** PostgreSQL ends a session idle inside a transaction this long (ms; 0 = never), freeing its connection and locks. */
    DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: int(30_000, 0),
    SEND_WAIT_MS: int(10_000, 0),
    /** Bound on one platform API call (ms). A call that reached the platform and timed out is not repeated: it may have been delivered. */
    PLATFORM_TIMEOUT_MS: int(15_000, 100),
    /** Send jobs one worker process runs at once: they mostly wait on platforms (up to 15 s each). */
    SEND_CONCURRENCY: int(64, 1),
    /** Per-connection flood guard on inbound platform webhooks (deliveries per second). */
    INBOUND_FLOOD_PER_SECOND: int(200, 1),
    /**
     * Requests one source address may make to the unauthenticated inbound paths (/webhooks/*)
     * per minute, all connections together. A platform delivering for many tenants from few
     * addresses shares it: keep it well above INBOUND_FLOOD_PER_SECOND × 60 (one busy connection).
     */
    INBOUND_PER_SOURCE_PER_MINUTE: int(60_000, 1),
    /** Meta verification handshakes (GET ?hub.verify_token=…) one source address may make per minute; Meta sends one per subscription change. */
    INBOUND_HANDSHAKE_PER_SOURCE_PER_MINUTE: int(30, 1),
    /**
     * Which proxies in front of the web process to believe about the client address
     * (X-Forwarded-For), as express's `trust proxy`: `false` (the socket's peer is the
     * client), `true` (any), a hop count, or comma-separated addresses/CIDRs/`loopback`,
     * `linklocal`, `uniquelocal`. The per-source limits key on that address.
     */
    TRUST_PROXY: z
      .string()
      .default('false')
      .transform((s, ctx): boolean | number | string[] => {
        const v = s.trim();
        if (v === 'true' || v === 'false') return v === 'true';
        if (/^\d+$/.test(v)) return Number(v);
        const parts = v
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean);
        const bad = parts.filter((p) => !PROXY_NAMES.includes(p) && !(/^[^/]+(\/\d{1,3})?$/.test(p) && isIP(p.split('/')[0]) !== 0));
        if (parts.length === 0 || bad.length) {
          ctx.addIssue({
            code: 'custom',
            message: `expected true, false, a hop count or addresses/CIDRs/${PROXY_NAMES.join('/')}, got "${bad[0] ?? v}"`,
          });
          return z.NEVER;
        }
        return parts;
      }),
    /** How long the inbound receiver and worker reuse a connection they looked up (ms). Changes are announced to every process at once; this bounds staleness when an announcement is lost. */
    INBOUND_LOOKUP_CACHE_MS: int(2000, 0),
    /** How long the send path (web and send worker) reuses a connection it loaded (ms). Changes are announced to every process at once, and a watcher that lost Redis drops everything on reconnecting; this bounds staleness only when one announcement is lost. Each expiry reloads and decrypts the connection in every process: at 2 s, 100 busy connections cost 50 loads a second per process. */
    CONNECTION_CACHE_MS: int(30_000, 0),
    /** Where the service may send requests: webhooks, media downloads, platform APIs (see src/net/outbound-policy.ts). */
    OUTBOUND_ADDRESS_POLICY: z.enum(['public-https', 'any']).optional(),
    /** The earlier name of OUTBOUND_ADDRESS_POLICY, still read when that is unset. */
    WEBHOOK_TARGET_POLICY: z.enum(['public-https', 'any']).optional(),
    WEBHOOK_TIMEOUT_MS: int(30_000, 1),
    WEBHOOK_RETRY_DELAYS_MS: msList('0,60000,300000,1800000,7200000'),
    /** Days delivery logs (and settled deliveries) are kept. */
    WEBHOOK_LOG_RETENTION_DAYS: int(30, 1),
    WEBHOOK_DISABLE_AFTER: int(50, 1),
    /** After a secret rotation, how long deliveries are also signed with the old secret (ms). */
    WEBHOOK_SECRET_OVERLAP_MS: int(86_400_000, 0),
    /** Webhook jobs in flight per worker process (an event's first attempts are one job); they mostly wait on receivers. */
    WEBHOOK_CONCURRENCY: int(200, 1),
    /** Most events one replay request scans. */
    WEBHOOK_REPLAY_MAX: int(10_000, 1),
    /** Sends in flight per broker destination per worker process; deliveries beyond it wait for a slot, or without holding a webhook slot once the broker stops answering. */
    DESTINATION_MAX_IN_FLIGHT: int(20, 1),
    /**
     * How long a broker destination at DESTINATION_MAX_IN_FLIGHT may answer nothing before it
     * counts as hung (ms): the deliveries waiting in line for it are then put back (no attempt
     * spent) instead of waiting on, and new ones are put back at once.
     */
    DESTINATION_STUCK_MS: int(1_000, 1),
    /**
     * A PEM file of certificate authorities broker destinations' TLS (amqps://, NATS tls://) also
     * trusts, beside Node's bundle: for brokers behind a private CA. Read at startup; the config
     * holds its text.
     */
    DESTINATION_CA_FILE: pemFile(),
    TRANSCRIPTION_API_BASE: z.url().optional(),
    TRANSCRIPTION_API_KEY: z.string().optional(),
    TRANSCRIPTION_MODEL: z.string().default('whisper-1'),
    /** First retry delay of a failed transcription (ms); doubles on each of the 5 attempts. */
    TRANSCRIPTION_RETRY_BASE_MS: int(2000, 0),
    /**
     * Platform API addresses for every connection without its own `api_base_url`, as
     * `TELEGRAM=http://…,SLACK=http://…` (staging proxies, local fakes).
     */
    PLATFORM_API_BASES: z
      .string()
      .default('')
      .transform((s, ctx) => {
        const out: Record<string, string> = {};
        for (const part of s
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean)) {
          const m = part.match(/^([A-Z]+)=(https?:\/\/\S+)$/);
          if (!m) {
            ctx.addIssue({ code: 'custom', message: `expected PLATFORM=http(s)://… pairs separated by commas, got "${part}"` });
            return z.NEVER;
          }
          out[m[1]] = m[2];
        }
        return out;
      }),
    /**
     * Send budgets that replace a platform's documented defaults (src/platforms/<name>/adapter.ts),
     * for accounts the platform granted more (WhatsApp throughput tiers, Slack apps with raised
     * tiers): JSON such as `{"WHATSAPP":{"connection":{"rate":250,"perMs":1000,"burst":0}}}`.
     * Each given budget (connection, recipient) replaces that one budget whole.
     */
    PLATFORM_RATE_BUDGETS: z
      .string()
      .default('{}')
      .transform((s, ctx) => {
        try {
          return JSON.parse(s) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: 'expected JSON' });
          return z.NEVER;
        }
      })
      .pipe(
        z.record(z.string().regex(/^[A-Z]+$/), z.strictObject({ connection: rateBudget.optional(), recipient: rateBudget.optional() })),
      ),
    /** Where file bytes live: Postgres (default) or an S3-compatible bucket. */
    FILE_STORAGE: z.enum(['postgres', 's3']).default('postgres'),
    S3_BUCKET: z.string().min(3).optional(),
    S3_REGION: z.string().default('us-east-1'),
    /** An S3-compatible endpoint (MinIO, R2…); unset = AWS. */
    S3_ENDPOINT: z.url().optional(),
    /** Unset = the AWS SDK's default credential chain. */
    S3_ACCESS_KEY_ID: z.string().optional(),
    S3_SECRET_ACCESS_KEY: z.string().optional(),
    /** Path-style addressing (bucket in the path), which most S3-compatible servers need. @default true when S3_ENDPOINT is set */
    S3_FORCE_PATH_STYLE: z
      .enum(['true', 'false', '1', '0'])
      .optional()
      .transform((v) => (v === undefined ? undefined : v === 'true' || v === '1')),
    /**
     * Retention of what grows per request (docs/OPERATIONS.md, src/retention/registry.ts).
     * Idempotency keys answer replays for 24 h (docs/guide.md, idempotency), so they are kept at least that long (hours).
     */
    IDEMPOTENCY_KEY_RETENTION_HOURS: int(24, 24),
    /** Days a link code is kept after it expires; until then a repeated activation still answers as the first. */
    LINK_CODE_RETENTION_DAYS: int(7, 0),
    /** Days an uploaded or downloaded file (and its S3 object) is kept; 0 = forever. Files a queued message still needs are kept. */
    FILE_RETENTION_DAYS: int(0, 0),
    /** Days a sent or failed outbound message record (GET /v1/messages/:id) is kept after it settled; 0 = forever. */
    MESSAGE_RETENTION_DAYS: int(0, 0),
    /** Days a developer-portal sign-in link or session is kept after it ended (expired or revoked). */
    PORTAL_SESSION_RETENTION_DAYS: int(7, 0),
    /** Days of events (and their edges) kept, dropped a whole month at a time once every event of it is older; 0 = forever. */
    EVENT_RETENTION_DAYS: int(0, 0),
    /** Serve /metrics of a worker-only process on this port (0 = off). */
    WORKER_METRICS_PORT: int(0, 0),
    /**
     * An OTLP/HTTP collector's base URL (traces go to `<url>/v1/traces`, protobuf). Unset, tracing
     * is off and its SDK is never loaded (src/tracing/); docs/OPERATIONS.md, "Traces".
     */
    OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
    /** Headers sent with every export, `key=value` pairs separated by commas (a vendor's API key). */
    OTEL_EXPORTER_OTLP_HEADERS: z
      .string()
      .optional()
      .transform((s, ctx) => {
        const headers: Record<string, string> = {};
        for (const pair of (s ?? '').split(',').filter((p) => p.trim())) {
          const at = pair.indexOf('=');
          if (at <= 0) {
            ctx.addIssue({ code: 'custom', message: 'expected key=value pairs separated by commas' });
            return z.NEVER;
          }
          headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
        }
        return headers;
      }),
    /** The `service.name` every span is exported under. */
    OTEL_SERVICE_NAME: z.string().min(1).max(200).default('messaging-gateway'),
    /** Which traces are kept: OpenTelemetry's sampler names; the ratio ones read OTEL_TRACES_SAMPLER_ARG. */
    OTEL_TRACES_SAMPLER: z
      .enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'])
      .default('parentbased_always_on'),
    /** The share of traces a ratio sampler keeps, 0 to 1. */
    OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).default(1),
    /** Link-code guessing budget: activation attempts per platform user per 15 minutes, and per application per minute. */
    LINK_CODE_ATTEMPTS_PER_USER: int(5, 1),
    LINK_CODE_ATTEMPTS_PER_APP: int(120, 1),
  })
  .superRefine((env, ctx) => {
    if (env.HTTP_REQUEST_TIMEOUT_MS !== 0 && env.HTTP_REQUEST_TIMEOUT_MS < env.HTTP_HEADERS_TIMEOUT_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['HTTP_REQUEST_TIMEOUT_MS'],
        message: `must be 0 or at least HTTP_HEADERS_TIMEOUT_MS (${env.HTTP_HEADERS_TIMEOUT_MS})`,
      });
    }
    if (env.JOB_STALL_CHECK_MS > env.JOB_LOCK_MS) {
      ctx.addIssue({ code: 'custom', path: ['JOB_STALL_CHECK_MS'], message: `must be at most JOB_LOCK_MS (${env.JOB_LOCK_MS})` });
    }
    if (env.LEDGER_LOCK_TIMEOUT_MS <= env.LEDGER_IDLE_TIMEOUT_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['LEDGER_LOCK_TIMEOUT_MS'],
        message: `must be above LEDGER_IDLE_TIMEOUT_MS (${env.LEDGER_IDLE_TIMEOUT_MS}): a writer behind a frozen one would fail before the server frees the head`,
      });
    }
    if (env.REDIS_SENTINELS && env.REDIS_CLUSTER_NODES)
      ctx.addIssue({ code: 'custom', path: ['REDIS_SENTINELS'], message: 'set REDIS_SENTINELS or REDIS_CLUSTER_NODES, not both' });
    if (env.REDIS_SENTINELS && !env.REDIS_SENTINEL_NAME)
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_SENTINEL_NAME'],
        message: 'required with REDIS_SENTINELS: the master group the sentinels monitor',
      });
    if (env.REDIS_CLUSTER_NODES && !env.REDIS_PREFIX.includes('{'))
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_PREFIX'],
        message: `must hold a {hash tag} on a Redis Cluster (REDIS_CLUSTER_NODES is set), e.g. {${env.REDIS_PREFIX}}: a BullMQ queue's keys must share one slot`,
      });
    const beyond = env.WORKER_QUEUES.flatMap((w) => (w.shards ?? []).filter((i) => i >= env.QUEUE_SHARDS).map((i) => `${w.queue}:${i}`));
    if (beyond.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['WORKER_QUEUES'],
        message: `${beyond.join(', ')} beyond QUEUE_SHARDS (${env.QUEUE_SHARDS}): shards count from 0`,
      });
    }
    if (env.FILE_STORAGE === 's3' && !env.S3_BUCKET)
      ctx.addIssue({ code: 'custom', path: ['S3_BUCKET'], message: 'is required when FILE_STORAGE=s3' });
    if (env.NODE_ENV === 'production') {
      if (!env.ADMIN_TOKEN) ctx.addIssue({ code: 'custom', path: ['ADMIN_TOKEN'], message: 'is required in production' });
      if (!env.SECRETS_KEY) ctx.addIssue({ code: 'custom', path: ['SECRETS_KEY'], message: 'is required in production' });
    }
  })
  .transform((env) => ({
    ...env,
    ADMIN_TOKEN: env.ADMIN_TOKEN ?? DEV_ADMIN_TOKEN,
    SECRETS_KEY: env.SECRETS_KEY ?? DEV_SECRETS_KEY,
    PUBLIC_BASE_URL: (env.PUBLIC_BASE_URL ?? `http://localhost:${env.PORT}`).replace(/\/$/, ''),
    /** Whether PUBLIC_BASE_URL was set, not defaulted: the OpenAPI document names only a real address as its server. */
    publicBaseUrlConfigured: env.PUBLIC_BASE_URL !== undefined,
    OUTBOUND_ADDRESS_POLICY:
      env.OUTBOUND_ADDRESS_POLICY ?? env.WEBHOOK_TARGET_POLICY ?? (env.NODE_ENV === 'production' ? 'public-https' : 'any'),
    usingDevSecrets: !env.ADMIN_TOKEN || !env.SECRETS_KEY,
    /** Where every Redis connection goes (src/redis.ts): the cluster's seeds when given, else REDIS_URL. */
    redis: redisTarget(env),
  }));

type HostPort = { host: string; port: number };

/** A comma-separated `host:port` list (IPv6 in brackets), or undefined when unset. */
function hostPorts(what: string) {
  return z
    .string()
    .optional()
    .transform((s, ctx): HostPort[] | undefined => {
      if (s === undefined) return undefined;
      const nodes = s
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean)
        .map((p) => /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(p));
      if (!nodes.length || nodes.some((m) => !m || Number(m[2]) < 1 || Number(m[2]) > 65535)) {
        ctx.addIssue({ code: 'custom', message: `expected comma-separated host:port ${what}` });
        return z.NEVER;
      }
      return nodes.map((m) => ({ host: m![1].replace(/^\[|\]$/g, ''), port: Number(m![2]) }));
    });
}

/**
 * What a cluster or the master behind sentinels is reached with, from REDIS_URL: its user and
 * password, TLS for `rediss://`, its database (a cluster has only 0). One URL carries them for
 * every topology, as a managed service hands them out.
 */
export interface RedisAuth {
  username?: string;
  password?: string;
  tls?: true;
  db?: number;
}

function authOf(url: string): RedisAuth | undefined {
  const u = new URL(url);
  const auth: RedisAuth = {
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: true as const } : {}),
  };
  const db = Number(u.pathname.slice(1) || 0);
  if (Number.isInteger(db) && db > 0) auth.db = db;
  return Object.keys(auth).length ? auth : undefined;
}

/** Where every Redis connection goes (src/redis.ts): the cluster's seeds, the sentinels, else REDIS_URL. */
function redisTarget(env: {
  REDIS_URL: string;
  REDIS_CLUSTER_NODES?: HostPort[];
  REDIS_SENTINELS?: HostPort[];
  REDIS_SENTINEL_NAME?: string;
  REDIS_SENTINEL_PASSWORD?: string;
}): RedisTarget {
  const auth = authOf(env.REDIS_URL);
  const withAuth = auth ? { auth } : {};
  if (env.REDIS_CLUSTER_NODES) return { clusterNodes: env.REDIS_CLUSTER_NODES, ...withAuth };
  if (env.REDIS_SENTINELS)
    return {
      sentinels: env.REDIS_SENTINELS,
      sentinelName: env.REDIS_SENTINEL_NAME!,
      ...(env.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: env.REDIS_SENTINEL_PASSWORD } : {}),
      ...withAuth,
    };
  return { url: env.REDIS_URL };
}

/** Where Redis is: one server by URL, a Redis Cluster by its seed nodes, or a master its sentinels name. */
export type RedisTarget =
  | { url: string }
  | { clusterNodes: HostPort[]; auth?: RedisAuth }
  | { sentinels: HostPort[]; sentinelName: string; sentinelPassword?: string; auth?: RedisAuth };

export type Config = z.infer<typeof schema>;

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

/** Parses an environment; throws ConfigError naming the first bad variable. */
export function parseConfig(env: Record<string, string | undefined>): Config {
  // An empty string means "unset" — operators blank variables as often as they delete them.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    const issue = result.error.issues[0];
    const variable = String(issue.path[0] ?? 'environment');
    const value = cleaned[variable];
    const shown = value === undefined || /TOKEN|KEY|SECRET|URL|ENDPOINT|HEADERS/.test(variable) ? '' : ` (got "${value}")`;
    throw new ConfigError(variable, `${issue.message}${shown}`);
  }
  return result.data;
}

/**
 * The one reader of process.env. A bad value stops the process with one line naming the
 * variable, which is what an operator looking at a crash loop needs.
 */
export function loadConfig(): Config {
  try {
    return parseConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`config error: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
