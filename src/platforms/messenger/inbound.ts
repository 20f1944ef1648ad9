import { metaMessagingInbound } from '../meta-messaging.js';

/** Messenger webhooks (`object: "page"`), routed by page id. */
export const messengerInbound = metaMessagingInbound('MESSENGER');
