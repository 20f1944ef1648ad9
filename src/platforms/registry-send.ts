// TEMPORARY until the platforms-send branch lands.
export const SEND = {} as Record<string, any>;
