import { randomBytes } from 'node:crypto';
import { PlatformFake, RateLimit, type FakeReply, type RecordedRequest } from './fake-server.js';

/** chat.postMessage: about one message per second per channel, short bursts allowed. */
const SLACK_LIMITS = { perChannel: { rate: 1, perMs: 1000, burst: 3 } };

export interface SlackFakeOptions {
  /** The bot token the fake accepts; any other is `invalid_auth`. Undefined: any xoxb- token. */
  botToken?: string;
  /** Enforce the per-channel limit with HTTP 429 + Retry-After. */
  limits?: boolean;
}

const refuse = (error: string): FakeReply => ({ status: 200, body: { ok: false, error } });

/**
 * Slack's Web API as its API reference documents it: chat.postMessage → `{ok, channel, ts,
 * message}`, refusals as HTTP 200 `{ok:false, error}`, rate limits as HTTP 429 with
 * Retry-After; plus the external file upload (getUploadURLExternal, the upload URL,
 * completeUploadExternal).
 */
export class SlackFake extends PlatformFake {
  /** Channels the bot may post to; others are `channel_not_found`. Empty: every well-formed id exists. */
  readonly channels = new Set<string>();
  /** Channels that exist but the bot is not a member of. */
  readonly notInChannel = new Set<string>();
  readonly archived = new Set<string>();
  /** Uploads: file id → bytes once uploaded. */
  readonly uploads = new Map<string, { filename: string; length: number; data?: Buffer }>();
  limitHits = 0;
  private seq = 0;
  private readonly perChannel?: RateLimit;

  private constructor(private readonly options: SlackFakeOptions) {
    super();
    if (options.limits)
      this.perChannel = new RateLimit(SLACK_LIMITS.perChannel.rate, SLACK_LIMITS.perChannel.perMs, SLACK_LIMITS.perChannel.burst);
  }

  static async start(options: SlackFakeOptions = {}): Promise<SlackFake> {
    return PlatformFake.listening(new SlackFake(options));
  }

  private channelError(channel: unknown): string | undefined {
    if (typeof channel !== 'string' || !/^[CDGUW][A-Z0-9]+$/.test(channel)) return 'channel_not_found';
    if (this.channels.size > 0 && !this.channels.has(channel) && !this.notInChannel.has(channel) && !this.archived.has(channel))
      return 'channel_not_found';
    if (this.notInChannel.has(channel)) return 'not_in_channel';
    if (this.archived.has(channel)) return 'is_archived';
    return undefined;
  }

  protected handle(r: RecordedRequest): FakeReply {
    const upload = r.path.match(/^\/upload\/(F[A-Z0-9]+)$/);
    if (upload) {
      const u = this.uploads.get(upload[1]);
      if (!u) return { status: 404, body: 'not found' };
      u.data = r.rawBody;
      return { status: 200, body: `OK - ${r.rawBody.length}` };
    }
    const m = r.path.match(/^\/api\/([a-zA-Z.]+)$/);
    if (!m || r.method !== 'POST') return { status: 404, body: { ok: false, error: 'unknown_method' } };
    const auth = r.headers.authorization ?? '';
    if (!auth.startsWith('Bearer ')) return refuse('not_authed');
    const token = auth.slice(7);
    if (!token.startsWith('xoxb-') || (this.options.botToken !== undefined && token !== this.options.botToken))
      return refuse('invalid_auth');
    const args: Record<string, any> = r.json ?? r.form ?? {};

    switch (m[1]) {
      case 'chat.postMessage': {
        const bad = this.channelError(args.channel);
        if (bad) return refuse(bad);
        if (typeof args.text !== 'string' || args.text.length === 0) return refuse('no_text');
        if (args.text.length > 40_000) return refuse('msg_too_long');
        const wait = this.perChannel?.take(args.channel) ?? 0;
        if (wait > 0) {
          this.limitHits += 1;
          return {
            status: 429,
            body: { ok: false, error: 'ratelimited' },
            headers: { 'retry-after': String(Math.max(1, Math.ceil(wait / 1000))) },
          };
        }
        this.accepted.push(r);
        const ts = `${Math.floor(Date.now() / 1000)}.${String(++this.seq).padStart(6, '0')}`;
        return {
          status: 200,
          body: {
            ok: true,
            channel: args.channel,
            ts,
            message: { type: 'message', user: 'UFAKEBOT1', text: args.text, ts, ...(args.thread_ts ? { thread_ts: args.thread_ts } : {}) },
          },
        };
      }
      case 'files.getUploadURLExternal': {
        const length = Number(args.length);
        if (!args.filename || !Number.isInteger(length) || length <= 0) return refuse('invalid_arguments');
        const id = `F${randomBytes(5).toString('hex').toUpperCase()}`;
        this.uploads.set(id, { filename: args.filename, length });
        return { status: 200, body: { ok: true, upload_url: `${this.url}/upload/${id}`, file_id: id } };
      }
      case 'files.completeUploadExternal': {
        const files = args.files as { id: string; title?: string }[] | undefined;
        if (!Array.isArray(files) || files.length === 0) return refuse('invalid_arguments');
        if (files.some((f) => !this.uploads.get(f.id)?.data)) return refuse('file_not_found');
        if (args.channel_id) {
          const bad = this.channelError(args.channel_id);
          if (bad) return refuse(bad);
        }
        this.accepted.push(r);
        return {
          status: 200,
          body: { ok: true, files: files.map((f) => ({ id: f.id, title: f.title ?? this.uploads.get(f.id)!.filename })) },
        };
      }
      case 'auth.test':
        return { status: 200, body: { ok: true, user_id: 'UFAKEBOT1', team_id: 'TFAKE', bot_id: 'BFAKE' } };
      default:
        return refuse('unknown_method');
    }
  }
}
