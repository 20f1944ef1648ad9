import type { Deps } from '../deps.js';
import type { Api } from './api.js';
import { registerEventRoutes } from './events.js';
import { registerEventSchemaRoutes } from './event-schemas.js';
import { registerConnectionRoutes } from './connections.js';
import { registerFileRoutes } from './files.js';
import { registerMessageRoutes } from './messages.js';
import { registerUserRoutes } from './users.js';
import { registerLinkCodeRoutes } from './link-codes.js';
import { registerConversationRoutes } from './conversations.js';
import { registerPortalRoutes } from './portal.js';
import { registerApiKeyRoutes } from './api-keys.js';
import { registerPlatformRoutes } from './platforms.js';
import { registerSandboxRoutes } from './sandbox.js';
import { registerWebhookDeliveryRoutes } from './webhook-deliveries.js';
import { registerStreamRoutes } from '../stream/sse.js';
import type { WebServices } from './web-services.js';
import { registerWebhookRoutes } from './webhooks.js';

export interface RouteContext {
  deps: Deps;
  web: WebServices;
  onShutdown: (() => Promise<void> | void)[];
}

/** Every REST resource registers itself here, one module per resource. */
export const ROUTES: ((api: Api, ctx: RouteContext) => void)[] = [
  registerEventRoutes,
  registerEventSchemaRoutes,
  registerConnectionRoutes,
  registerMessageRoutes,
  registerFileRoutes,
  registerWebhookRoutes,
  registerUserRoutes,
  registerLinkCodeRoutes,
  registerConversationRoutes,
  registerStreamRoutes,
  registerPortalRoutes,
  registerApiKeyRoutes,
  registerWebhookDeliveryRoutes,
  registerPlatformRoutes,
  registerSandboxRoutes,
];
