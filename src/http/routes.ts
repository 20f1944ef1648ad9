import type { Deps } from '../deps.js';
import type { Api } from './api.js';

export interface RouteContext {
  deps: Deps;
  onShutdown: (() => Promise<void> | void)[];
}

/** Every REST resource registers itself here, one module per resource. */
export const ROUTES: ((api: Api, ctx: RouteContext) => void)[] = [];
