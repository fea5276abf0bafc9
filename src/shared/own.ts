// Look-ups keyed by client input. A plain object literal answers `constructor`,
// `__proto__`, `toString` ... from Object.prototype; these helpers answer only own keys.

/** `obj[key]` when `key` is the object's own property, else undefined. */
export function ownValue<V>(obj: Readonly<Record<string, V>>, key: string): V | undefined {
  return Object.hasOwn(obj, key) ? obj[key] : undefined
}

/** Whether `v` is an object, not null and not an array (a JSON object). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** Freezes `o` and every object below it (one already frozen is taken as frozen throughout). */
export function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o)
    for (const v of Object.values(o)) deepFreeze(v)
  }
  return o
}

/** An empty record with no prototype, safe to fill with client-chosen keys. */
export function bareRecord<V>(): Record<string, V> {
  return Object.create(null) as Record<string, V>
}
