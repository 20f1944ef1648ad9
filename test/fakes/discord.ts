import { PlatformFake, RateLimit, type FakeReply, type RecordedRequest } from './fake-server.js';

/** Discord's per-channel bucket for creating messages (5 per 5 s) and the global 50 requests/s. */
const DISCORD_LIMITS = { perChannel: { rate: 5, perMs: 5000, burst: 0 }, global: { rate: 50, perMs: 1000, burst: 0 } };

export interface DiscordFakeOptions {
  /** The bot token the fake accepts; any other is 401. Undefined: any token. */
  botToken?: string;
  /** Enforce the per-channel and global limits with 429 `{message, retry_after, global}`. */
  limits?: boolean;
}

const err = (status: number, code: number, message: string, extra: Record<string, unknown> = {}): FakeReply => ({
  status,
  body: { message, code, ...extra },
});

let snowflakeSeq = 0;
/** A snowflake-shaped id: ms since the Discord epoch shifted left 22 bits, plus a counter. */
function snowflake(): string {
  return ((BigInt(Date.now() - 1420070400000) << 22n) | BigInt(++snowflakeSeq % 4096)).toString();
}

/**
 * The Discord REST API's create-message route (the platform's API reference): `Authorization: Bot <token>`,
 * `{content ≤ 2000}` (JSON, or multipart with payload_json and files[n]) → Message; 429 with
 * `{message, retry_after (float s), global}`, `Retry-After` and `X-RateLimit-*` headers.
 */
export class DiscordFake extends PlatformFake {
  /** Channels that do not exist (10003). */
  readonly unknownChannels = new Set<string>();
  /** Channels the bot cannot see (50001 Missing Access). */
  readonly noAccess = new Set<string>();
  /** DM channels of users who do not accept messages from the bot (50007). */
  readonly closedDms = new Set<string>();
  limitHits = 0;
  private readonly perChannel?: RateLimit;
  private readonly global?: RateLimit;

  private constructor(private readonly options: DiscordFakeOptions) {
    super();
    if (options.limits) {
      this.perChannel = new RateLimit(DISCORD_LIMITS.perChannel.rate, DISCORD_LIMITS.perChannel.perMs, DISCORD_LIMITS.perChannel.burst);
      this.global = new RateLimit(DISCORD_LIMITS.global.rate, DISCORD_LIMITS.global.perMs, DISCORD_LIMITS.global.burst);
    }
  }

  static async start(options: DiscordFakeOptions = {}): Promise<DiscordFake> {
    return PlatformFake.listening(new DiscordFake(options));
  }

  protected handle(r: RecordedRequest): FakeReply {
    const auth = r.headers.authorization ?? '';
    const token = auth.startsWith('Bot ') ? auth.slice(4) : undefined;
    if (!token || (this.options.botToken !== undefined && token !== this.options.botToken)) return err(401, 0, '401: Unauthorized');
    const m = r.path.match(/^\/api\/v10\/channels\/(\d+)\/messages$/);
    if (!m || r.method !== 'POST') return err(404, 0, '404: Not Found');
    const channel = m[1];
    const payload = (r.json ?? (r.form?.payload_json ? JSON.parse(r.form.payload_json) : undefined)) as { content?: string } | undefined;
    const content = payload?.content ?? '';
    if (content.length === 0 && !r.files?.length) return err(400, 50006, 'Cannot send an empty message');
    if ([...content].length > 2000) {
      return err(400, 50035, 'Invalid Form Body', {
        errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 2000 or fewer in length.' }] } },
      });
    }
    if (this.unknownChannels.has(channel)) return err(404, 10003, 'Unknown Channel');
    if (this.noAccess.has(channel)) return err(403, 50001, 'Missing Access');
    if (this.closedDms.has(channel)) return err(403, 50007, 'Cannot send messages to this user');
    const now = performance.now();
    const globalWait = this.global?.take('global', now) ?? 0;
    const channelWait = globalWait > 0 ? 0 : (this.perChannel?.take(channel, now) ?? 0);
    if (globalWait > 0 || channelWait > 0) {
      this.limitHits += 1;
      const seconds = Math.max(globalWait, channelWait) / 1000;
      return {
        status: 429,
        body: { message: 'You are being rate limited.', retry_after: Number(seconds.toFixed(3)), global: globalWait > 0 },
        headers: {
          'retry-after': String(Math.ceil(seconds)),
          'x-ratelimit-limit': '5',
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset-after': seconds.toFixed(3),
          'x-ratelimit-bucket': 'fakebucket',
          'x-ratelimit-scope': globalWait > 0 ? 'global' : 'user',
          ...(globalWait > 0 ? { 'x-ratelimit-global': 'true' } : {}),
        },
      };
    }
    this.accepted.push(r);
    return {
      status: 200,
      body: {
        id: snowflake(),
        channel_id: channel,
        content,
        type: 0,
        author: { id: '100000000000000001', username: 'fake-bot', bot: true },
        attachments: (r.files ?? []).map((f) => ({ id: snowflake(), filename: f.filename, size: f.data.length, content_type: f.type })),
        timestamp: new Date().toISOString(),
      },
    };
  }
}
