import { randomBytes } from 'node:crypto';
import { PlatformFake, type FakeReply, type RecordedRequest } from './fake-server.js';
import { bearerOf, graphError, invalidToken } from './meta-graph.js';

export interface PageSendFakeOptions {
  /** The page access token the fake accepts; any other gets 401/190. Undefined: any token. */
  accessToken?: string;
}

/**
 * The Send API of Messenger and Instagram (Meta's Graph API reference): `{recipient:{id}, messaging_type,
 * message:{text}}` → `{recipient_id, message_id}`, Graph errors for a closed 24 h window,
 * an unavailable person, an unknown user, a bad token.
 */
export class PageSendFake extends PlatformFake {
  readonly windowClosed = new Set<string>();
  /** People not available to the page (blocked it, deactivated): code 551. */
  readonly unavailable = new Set<string>();
  /** Ids that match no user of the page: code 100 / 2018001. */
  readonly unknownUsers = new Set<string>();

  protected constructor(
    private readonly platform: 'messenger' | 'instagram',
    private readonly options: PageSendFakeOptions,
  ) {
    super();
  }

  protected handle(r: RecordedRequest): FakeReply {
    const token = bearerOf(r);
    if (!token || (this.options.accessToken !== undefined && token !== this.options.accessToken)) return invalidToken();
    // Messenger: /{version}/{page id}/messages; Instagram: /{ig id}/messages (their API references), versioned or not.
    const m = r.path.match(/^(?:\/v\d+\.\d+)?\/(\d+)\/messages$/);
    if (!m || r.method !== 'POST') return graphError(400, 100, '(#100) Unsupported post request.');
    const b = r.json as Record<string, any> | undefined;
    const to = b?.recipient?.id;
    if (typeof to !== 'string') return graphError(400, 100, '(#100) param recipient must be non-empty.');
    if (!b?.messaging_type) return graphError(400, 100, '(#100) param messaging_type must be non-empty.');
    const text = b.message?.text;
    if (typeof text !== 'string' || text.length === 0) return graphError(400, 100, '(#100) param message must be non-empty.');
    const limit = this.platform === 'instagram' ? 1000 : 2000;
    if ([...text].length > limit)
      return graphError(400, 100, `(#100) Length of param message[text] must be less than or equal to ${limit}`);
    if (this.unknownUsers.has(to)) return graphError(400, 100, '(#100) No matching user found', { subcode: 2018001 });
    if (this.unavailable.has(to)) return graphError(400, 551, "(#551) This person isn't available right now.", { subcode: 1545041 });
    if (this.windowClosed.has(to)) {
      return graphError(400, 10, '(#10) This message is sent outside of allowed window.', {
        subcode: this.platform === 'instagram' ? 2534022 : 2018278,
      });
    }
    this.accepted.push(r);
    const prefix = this.platform === 'instagram' ? 'aWdfZAG' : 'm_';
    return { status: 200, body: { recipient_id: to, message_id: `${prefix}${randomBytes(24).toString('base64url')}` } };
  }
}

export class MessengerFake extends PageSendFake {
  static async start(options: PageSendFakeOptions = {}): Promise<MessengerFake> {
    return PlatformFake.listening(new MessengerFake('messenger', options));
  }
}
