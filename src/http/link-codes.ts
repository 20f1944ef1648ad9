import { z } from 'zod';
import { activateLinkCode, activateLinkCodeInput, createLinkCode, createLinkCodeInput } from '../identity/link-codes.js';
import type { Api } from './api.js';
import type { RouteContext } from './routes.js';
import { unwrapIdentity } from '../identity/users.js';

const linkCodeOut = z.object({
  id: z.string(),
  code: z.string(),
  user_id: z.string(),
  expires_at: z.string(),
  deep_links: z.array(z.object({ platform: z.string(), platform_connection_id: z.string(), url: z.string() })),
  created_at: z.string(),
});
const activationOut = z.object({
  link_code_id: z.string(),
  user_id: z.string(),
  platform_user_id: z.string(),
  merged_user_id: z.string().nullable(),
  replayed: z.boolean(),
});

export function registerLinkCodeRoutes(api: Api, { web }: RouteContext): void {
  api.route({
    method: 'post',
    path: '/v1/link-codes',
    operationId: 'createLinkCode',
    description:
      'Makes a short single-use code for a user: when the person sends it from a chat platform, that platform account joins the user. Expires after its TTL (10 minutes by default). Records `link_code.generated`.',
    summary:
      'A single-use code (default TTL 10 minutes) that links the platform account sending it back to this user; records link_code.generated',
    scope: 'users:write',
    body: createLinkCodeInput,
    responses: { 201: { description: 'The code, when it expires, and ready links for platforms that have them', schema: linkCodeOut } },
    errors: ['NOT_FOUND', 'USER_MERGED', 'CONFLICT'],
    handler: async ({ deps, principal, body }) => ({
      status: 201,
      body: unwrapIdentity(await createLinkCode(deps, principal.appId, body)),
    }),
  });

  api.route({
    method: 'post',
    path: '/v1/link-codes/:code/activate',
    operationId: 'activateLinkCode',
    description:
      "Uses a link code for a given platform user, as if the person had sent it: the platform user joins the code's user, merging users when it belonged to another. Records `link_code.activation` (and `user.merged` when users merged).",
    summary:
      "Use a code for a platform user: it joins the code's user (merging users when needed); records link_code.activation and user.merged",
    scope: 'users:write',
    params: z.object({ code: z.string().max(100) }),
    body: activateLinkCodeInput,
    responses: {
      200: { description: 'Linked (replayed: true when this platform user had already used this code)', schema: activationOut },
    },
    errors: ['NOT_FOUND', 'LINK_CODE_NOT_FOUND', 'LINK_CODE_EXPIRED', 'LINK_CODE_USED', 'LINK_CODE_ATTEMPTS_EXCEEDED', 'CONFLICT'],
    async handler({ deps, principal, params, body }) {
      return {
        status: 200,
        body: unwrapIdentity(
          await activateLinkCode(deps, web.linkCodes, principal.appId, {
            code: params.code,
            platformUserId: body.platform_user_id,
            via: 'api',
          }),
        ),
      };
    },
  });
}
