// TEMPORARY until the platforms-inbound branch lands.
export const INBOUND = {} as Record<string, any>;
