import { PageSendFake, type PageSendFakeOptions } from './messenger.js';

/** Instagram messaging: the Messenger Send API shape on `/{IG_ID}/messages`, text under 1000 characters. */
export class InstagramFake extends PageSendFake {
  static async start(options: PageSendFakeOptions = {}): Promise<InstagramFake> {
    return PageSendFake.listening(new InstagramFake('instagram', options));
  }
}
