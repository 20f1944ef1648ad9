import { createHash, randomBytes } from 'node:crypto';
import { PlatformFake, RateLimit, type FakeReply, type RecordedRequest } from './fake-server.js';
import { bearerOf, graphError, invalidToken } from './meta-graph.js';

/** WhatsApp's documented limits: ~80 msg/s per number (130429), ~1 msg per 6 s to one user (131056). */
const WHATSAPP_LIMITS = {
  perNumber: { rate: 80, perMs: 1000, burst: 5 },
  perPair: { rate: 1, perMs: 6000, burst: 3 },
};

export interface WhatsappFakeOptions {
  /** The access token the fake accepts; any other gets 401/190. Undefined: any token. */
  accessToken?: string;
  /** Enforce the documented throughput and pair limits (true = WHATSAPP_LIMITS). */
  limits?: boolean;
}

/**
 * The WhatsApp Cloud API as its API reference documents it: `/{version}/{phone_number_id}/messages`
 * (text and media by id), `/media` uploads, media lookup and download; errors by Graph `code`
 * (131047 reply window, 131026 undeliverable, 130429/131056 limits, 190 bad token).
 */
export class WhatsappFake extends PlatformFake {
  /** Recipients whose 24-hour window is closed (131047). */
  readonly windowClosed = new Set<string>();
  /** Recipients that cannot receive (131026). */
  readonly undeliverable = new Set<string>();
  /** Media uploaded through `/media`, and media served to downloads: id → bytes. */
  readonly media = new Map<string, { data: Buffer; mimeType: string }>();
  limitHits = 0;
  private readonly perNumber?: RateLimit;
  private readonly perPair?: RateLimit;

  private constructor(private readonly options: WhatsappFakeOptions) {
    super();
    if (options.limits) {
      this.perNumber = new RateLimit(WHATSAPP_LIMITS.perNumber.rate, WHATSAPP_LIMITS.perNumber.perMs, WHATSAPP_LIMITS.perNumber.burst);
      this.perPair = new RateLimit(WHATSAPP_LIMITS.perPair.rate, WHATSAPP_LIMITS.perPair.perMs, WHATSAPP_LIMITS.perPair.burst);
    }
  }

  static async start(options: WhatsappFakeOptions = {}): Promise<WhatsappFake> {
    return PlatformFake.listening(new WhatsappFake(options));
  }

  /** Makes media downloadable (inbound tests): returns the media id. */
  addMedia(data: Buffer, mimeType: string): string {
    const id = String(10 ** 15 + Math.floor(Math.random() * 10 ** 14));
    this.media.set(id, { data, mimeType });
    return id;
  }

  protected handle(r: RecordedRequest): FakeReply {
    const token = bearerOf(r);
    if (!token || (this.options.accessToken !== undefined && token !== this.options.accessToken)) return invalidToken();

    const download = r.path.match(/^\/media-download\/(\d+)$/);
    if (download) {
      const m = this.media.get(download[1]);
      return m ? { status: 200, body: m.data, headers: { 'content-type': m.mimeType } } : { status: 404, body: 'Not Found' };
    }
    const upload = r.path.match(/^\/(v\d+\.\d+)\/(\d+)\/media$/);
    if (upload && r.method === 'POST') {
      const file = r.files?.find((f) => f.field === 'file');
      if (r.form?.messaging_product !== 'whatsapp' || !file)
        return graphError(400, 100, '(#100) The parameter messaging_product is required.');
      const id = this.addMedia(file.data, r.form.type ?? file.type);
      return { status: 200, body: { id } };
    }
    const lookup = r.path.match(/^\/(v\d+\.\d+)\/(\d+)$/);
    if (lookup && r.method === 'GET') {
      const m = this.media.get(lookup[2]);
      if (!m) return graphError(400, 100, '(#100) Unsupported get request.');
      return {
        status: 200,
        body: {
          messaging_product: 'whatsapp',
          url: `${this.url}/media-download/${lookup[2]}`,
          mime_type: m.mimeType,
          sha256: createHash('sha256').update(m.data).digest('hex'),
          file_size: m.data.length,
          id: lookup[2],
        },
      };
    }
    const send = r.path.match(/^\/(v\d+\.\d+)\/(\d+)\/messages$/);
    if (!send || r.method !== 'POST') return graphError(400, 100, '(#100) Unsupported post request.');
    const b = r.json as Record<string, any> | undefined;
    if (b?.messaging_product !== 'whatsapp') return graphError(400, 100, '(#100) The parameter messaging_product is required.');
    if (typeof b.to !== 'string' || !b.type) return graphError(400, 100, '(#100) The parameter to is required.');
    if (b.type === 'text') {
      if (typeof b.text?.body !== 'string' || b.text.body.length === 0)
        return graphError(400, 100, "(#100) The parameter text['body'] is required.");
      if ([...b.text.body].length > 4096) return graphError(400, 100, "(#100) Param text['body'] must be at most 4096 characters long.");
    } else if (['image', 'video', 'audio', 'document'].includes(b.type)) {
      if (!this.media.has(b[b.type]?.id)) return graphError(400, 131053, 'Media upload error', { details: 'Unknown media id' });
    } else return graphError(400, 100, `(#100) Unsupported message type ${b.type}`);
    const to = b.to.replace(/^\+/, '');
    if (this.windowClosed.has(to)) {
      return graphError(400, 131047, '(#131047) Re-engagement message', {
        details: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
      });
    }
    if (this.undeliverable.has(to))
      return graphError(400, 131026, '(#131026) Message Undeliverable.', { details: 'Message Undeliverable.' });
    const now = performance.now();
    if (this.perNumber && this.perNumber.take(send[2], now) > 0) {
      this.limitHits += 1;
      return graphError(400, 130429, '(#130429) Rate limit hit', { details: 'Cloud API message throughput has been reached.' });
    }
    if (this.perPair && this.perPair.take(`${send[2]}:${to}`, now) > 0) {
      this.limitHits += 1;
      return graphError(400, 131056, '(#131056) (Business Account, Consumer Account) pair rate limit hit', {
        details: 'Too many messages sent from the sender phone number to the same recipient phone number in a short period of time.',
      });
    }
    this.accepted.push(r);
    return {
      status: 200,
      body: {
        messaging_product: 'whatsapp',
        contacts: [{ input: b.to, wa_id: to }],
        messages: [{ id: `wamid.${randomBytes(24).toString('base64url')}` }],
      },
    };
  }
}
