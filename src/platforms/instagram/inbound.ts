import { metaMessagingInbound } from '../meta-messaging.js';

/** Instagram messaging webhooks (`object: "instagram"`), routed by the Instagram account id. */
export const instagramInbound = metaMessagingInbound('INSTAGRAM');
