/**
 * Recipient id checks done before a send is queued (INVALID_RECIPIENT): each returns a
 * message saying what is wrong, or undefined when the id has the platform's shape.
 */

/** E.164: a plus, a country code not starting with 0, at most 15 digits in all. */
const E164 = /^\+[1-9]\d{6,14}$/;

export function e164(to: string): string | undefined {
  return E164.test(to) ? undefined : `"${to}" is not a phone number in international E.164 form (e.g. +14155550123)`;
}

/**
 * WhatsApp takes the E.164 number with or without its plus: inbound messages name senders
 * by `wa_id`, the digits alone, and a reply to that id must work.
 */
export function whatsappNumber(to: string): string | undefined {
  return /^\+?[1-9]\d{6,14}$/.test(to) ? undefined : `"${to}" is not a phone number in international form (e.g. +14155550123 or 14155550123)`;
}

/** Telegram chat ids are integers: users positive, groups and channels negative. */
export function telegramChatId(to: string): string | undefined {
  return /^-?[1-9]\d{0,19}$/.test(to) ? undefined : `"${to}" is not a numeric Telegram chat id`;
}

/** Page/Instagram-scoped user ids (PSID / IGSID): digits. */
export function metaScopedId(to: string): string | undefined {
  return /^\d{1,40}$/.test(to) ? undefined : `"${to}" is not a page-scoped user id (digits only)`;
}

/** Slack conversation ids (C…, D…, G…) or a user id (U…/W…) to open a DM with. */
export function slackChannel(to: string): string | undefined {
  return /^[CDGUW][A-Z0-9]{6,}$/.test(to) ? undefined : `"${to}" is not a Slack channel or user id (e.g. C0123456789)`;
}

/** Discord snowflakes: 17 to 20 digits. */
export function discordSnowflake(to: string): string | undefined {
  return /^\d{17,20}$/.test(to) ? undefined : `"${to}" is not a Discord channel id (a 17 to 20 digit snowflake)`;
}

/** A plain addr-spec, without display name; strict enough that SMTP will not reject its syntax. */
export function emailAddress(to: string): string | undefined {
  return /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/.test(to) && to.length <= 254
    ? undefined
    : `"${to}" is not an e-mail address`;
}
