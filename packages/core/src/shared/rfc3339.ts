/**
 * RFC 3339 §5.6 `date-time`: a full date, `T`, a time, and a time zone (`Z` or `±hh:mm`) that is
 * required, because an instant without one means a different moment on every machine. The date
 * must exist in the calendar (no 30 February; `Date.parse` would roll it into March), the time
 * must be on a clock (hours to 23, minutes and seconds to 59: a leap second, `:60`, is refused
 * because no JavaScript Date can hold it), and the offset at most ±23:59.
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

export function isRfc3339Instant(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const match = RFC3339.exec(value);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  if (match[7] !== undefined && (Number(match[8]) > 23 || Number(match[9]) > 59)) return false;
  return Number.isFinite(Date.parse(value));
}
