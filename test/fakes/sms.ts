import { randomBytes } from 'node:crypto';
import { PlatformFake, type FakeReply, type RecordedRequest } from './fake-server.js';

export interface TwilioFakeOptions {
  /** Credentials the fake accepts; others get 401 / 20003. Undefined: any. */
  accountSid?: string;
  authToken?: string;
}

const err = (status: number, code: number, message: string): FakeReply => ({
  status,
  body: { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status },
});

/**
 * Twilio's Messages resource (the platform's API reference): form-encoded POST with basic auth →
 * 201 `{sid, status:"queued", …}`; errors as `{code, message, more_info, status}`.
 */
export class TwilioFake extends PlatformFake {
  /** Numbers that replied STOP (21610). */
  readonly optedOut = new Set<string>();
  /** Numbers that are not valid destinations (21211). */
  readonly invalidNumbers = new Set<string>();

  private constructor(private readonly options: TwilioFakeOptions) {
    super();
  }

  static async start(options: TwilioFakeOptions = {}): Promise<TwilioFake> {
    return PlatformFake.listening(new TwilioFake(options));
  }

  protected handle(r: RecordedRequest): FakeReply {
    const m = r.path.match(/^\/2010-04-01\/Accounts\/(AC[0-9a-fA-F]{32})\/Messages\.json$/);
    if (!m || r.method !== 'POST') return err(404, 20404, 'The requested resource was not found');
    const auth = r.headers.authorization ?? '';
    const [user, pass] = auth.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString().split(':') : [];
    const credsOk =
      user === m[1] &&
      pass &&
      (this.options.accountSid === undefined || user === this.options.accountSid) &&
      (this.options.authToken === undefined || pass === this.options.authToken);
    if (!credsOk) return err(401, 20003, 'Authenticate');
    const f = r.form ?? {};
    if (!f.To) return err(400, 21604, "A 'To' phone number is required.");
    if (!f.From && !f.MessagingServiceSid) return err(400, 21603, "A 'From' phone number is required.");
    if (!f.Body && !f.MediaUrl) return err(400, 21602, 'Message body is required.');
    if (!/^\+[1-9]\d{6,14}$/.test(f.To) || this.invalidNumbers.has(f.To))
      return err(400, 21211, `The 'To' number ${f.To} is not a valid phone number.`);
    if ((f.Body ?? '').length > 1600) return err(400, 21617, 'The concatenated message body exceeds the 1600 character limit.');
    if (this.optedOut.has(f.To)) return err(400, 21610, 'Attempt to send to unsubscribed recipient');
    this.accepted.push(r);
    const sid = `SM${randomBytes(16).toString('hex')}`;
    const now = new Date().toUTCString();
    return {
      status: 201,
      body: {
        sid,
        account_sid: m[1],
        to: f.To,
        from: f.From ?? null,
        messaging_service_sid: f.MessagingServiceSid ?? null,
        body: f.Body,
        status: 'queued',
        direction: 'outbound-api',
        num_segments: String(Math.max(1, Math.ceil((f.Body ?? '').length / 153))),
        date_created: now,
        date_updated: now,
        error_code: null,
        error_message: null,
        uri: `/2010-04-01/Accounts/${m[1]}/Messages/${sid}.json`,
      },
    };
  }
}
