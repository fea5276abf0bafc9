// auth.users: look-ups, inserts and column updates, and the user JSON of docs/auth-protocol.md §2.1.
// Column names come from a fixed allow-list and are quoted; values are parameters.
// Timestamps are written from the engine's clock (the `now` dependency), never the DB's.
import pg from 'pg'
import { quoteIdent, type Queryable } from '../../shared/index.js'
import type { IdentityRow, UserJson, UserRow, UserWithIdentities } from '../types.js'
import { factorsOfUser, toFactorJson } from './factors.js'
import { identitiesForUser, identitiesOfUsers, toIdentityJson } from './identities.js'
import { definedOnly, isoString } from '../json.js'

export const NIL_UUID = '00000000-0000-0000-0000-000000000000'

const COLUMNS = [
  'id',
  'aud',
  'role',
  'email',
  'encrypted_password',
  'email_confirmed_at',
  'invited_at',
  'confirmation_token',
  'confirmation_sent_at',
  'recovery_token',
  'recovery_sent_at',
  'email_change_token_new',
  'email_change',
  'email_change_sent_at',
  'email_change_token_current',
  'email_change_confirm_status',
  'last_sign_in_at',
  'raw_app_meta_data',
  'raw_user_meta_data',
  'created_at',
  'updated_at',
  'phone',
  'phone_confirmed_at',
  'phone_change',
  'phone_change_sent_at',
  'confirmed_at',
  'banned_until',
  'reauthentication_sent_at',
  'is_sso_user',
  'deleted_at',
  'is_anonymous',
] as const

/** The writable columns (confirmed_at is generated). */
export type UserColumn = Exclude<(typeof COLUMNS)[number], 'confirmed_at'>
const WRITABLE = new Set<string>(COLUMNS.filter((c) => c !== 'confirmed_at'))

export const USER_SELECT = COLUMNS.map((c) => 'u.' + quoteIdent(c)).join(', ')

/** The timestamp columns: the ones a reader passes through its `at`. */
const TIMESTAMPS = new Set<string>(COLUMNS.filter((c) => c.endsWith('_at') || c === 'banned_until'))

/** A user row's fields, each timestamp through `at`. */
function userRow(r: Record<string, unknown>, at: (v: unknown) => Date | null): UserRow {
  const u: Record<string, unknown> = {}
  for (const c of COLUMNS) u[c] = TIMESTAMPS.has(c) ? at(r[c]) : r[c]
  return u as unknown as UserRow
}

const asRead = (v: unknown): Date | null => v as Date | null

/**
 * The user of a row that carries USER_SELECT's columns among others (a join's row): a
 * plain object of exactly the user's columns.
 */
export function userOf(r: UserRow): UserRow {
  return userRow(r as unknown as Record<string, unknown>, asRead)
}

/**
 * USER_SELECT's columns as one json value (a select-list expression over the alias `u`): one
 * field for the driver to describe and parse instead of thirty-one, on the refresh grant's
 * hot path. userFromJson reads it back.
 */
export const USER_JSON = `pg_catalog.json_build_object(${COLUMNS.map((c) => `'${c}', u.${quoteIdent(c)}`).join(', ')})`

/** The driver's own timestamptz parser: a timestamp read from USER_JSON is the Date its column gives. */
const parseTimestamptz = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (text: string) => Date

/** How json writes a timestamptz of years 1 to 9999 AD whose zone offset has no seconds. */
const PLAIN_TIMESTAMPTZ = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?[+-]\d\d:\d\d$/

/**
 * A timestamptz of USER_JSON (json writes `2026-01-02T03:04:05.678912+00:00`). JavaScript's own
 * ISO parser reads the plain form to the same millisecond as the driver's parser (which
 * truncates microseconds too); anything else (BC, infinity, an offset with seconds) goes to the
 * driver's parser in the text form, which has a space for the `T`.
 */
function timestampOf(v: unknown): Date | null {
  if (typeof v !== 'string') return null
  return PLAIN_TIMESTAMPTZ.test(v) ? new Date(v) : parseTimestamptz(v.replace('T', ' '))
}

/**
 * A json timestamptz as Postgres orders it: its millisecond (timestampOf's) and the microseconds
 * past it (json writes up to six fraction digits); a missing one as null.
 */
function timestampKey(v: string | null): [number, number] | null {
  if (v === null) return null
  const ms = timestampOf(v)!.getTime()
  const fraction = /\.(\d{1,6})/.exec(v)?.[1] ?? ''
  return [ms, Number(fraction.padEnd(6, '0').slice(3))]
}

/** Ascending, a missing timestamp last (ORDER BY ... ASC puts NULLs last). */
function compareKeys(a: [number, number] | null, b: [number, number] | null): number {
  if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1
  return a[1] - b[1]
}

/**
 * Rows of json (a user's identities or factors) in the order of `ORDER BY created_at` (and then
 * `id` with `thenById`: uuids order as their text), so the statement needs no Sort node.
 * Rows with equal keys keep the order they came in (the sort is stable).
 */
export function inCreationOrder<T extends { created_at: string | null; id: string }>(
  rows: T[],
  thenById: boolean,
): T[] {
  if (rows.length < 2) return rows
  const keys = new Map(rows.map((r) => [r, timestampKey(r.created_at)]))
  return rows.slice().sort((a, b) => {
    const c = compareKeys(keys.get(a)!, keys.get(b)!)
    if (c !== 0 || !thenById || a.id === b.id) return c
    return a.id < b.id ? -1 : 1
  })
}

/** The user of a USER_JSON value, as a row of USER_SELECT reads. */
export function userFromJson(j: Record<string, unknown>): UserRow {
  return userRow(j, timestampOf)
}

export async function findUserById(q: Queryable, id: string): Promise<UserRow | null> {
  const r = await q.query<UserRow>(`SELECT ${USER_SELECT} FROM auth.users u WHERE u.id = $1`, [id])
  return r.rows[0] ?? null
}

/** Locks the user row for the rest of the transaction. */
export async function lockUserById(q: Queryable, id: string): Promise<UserRow | null> {
  const r = await q.query<UserRow>(`SELECT ${USER_SELECT} FROM auth.users u WHERE u.id = $1 FOR UPDATE`, [id])
  return r.rows[0] ?? null
}

/** GoTrue's FindUserByEmailAndAudience: non-SSO users, email compared lower-cased. */
export async function findUserByEmail(q: Queryable, email: string, aud: string): Promise<UserRow | null> {
  const r = await q.query<UserRow>(
    `SELECT ${USER_SELECT} FROM auth.users u
      WHERE u.instance_id = $3 AND pg_catalog.lower(u.email) = pg_catalog.lower($1) AND u.aud = $2 AND u.is_sso_user = false
      ORDER BY u.created_at LIMIT 1`,
    [email, aud, NIL_UUID],
  )
  return r.rows[0] ?? null
}

/** Any non-SSO user holding this email, whatever the audience (emails are unique per table). */
export async function isEmailTaken(q: Queryable, email: string, exceptUserId?: string): Promise<boolean> {
  const r = await q.query(
    `SELECT 1 FROM auth.users WHERE pg_catalog.lower(email) = pg_catalog.lower($1) AND is_sso_user = false AND ($2::uuid IS NULL OR id <> $2::uuid) LIMIT 1`,
    [email, exceptUserId ?? null],
  )
  return (r.rowCount ?? 0) > 0
}

export async function findUserByPhone(q: Queryable, phone: string, aud: string): Promise<UserRow | null> {
  const r = await q.query<UserRow>(
    `SELECT ${USER_SELECT} FROM auth.users u WHERE u.phone = $1 AND u.aud = $2 LIMIT 1`,
    [phone, aud],
  )
  return r.rows[0] ?? null
}

interface NewUser {
  id: string
  aud: string
  role: string
  email?: string | null
  phone?: string | null
  encryptedPassword?: string | null
  appMetadata: Record<string, unknown>
  userMetadata: Record<string, unknown>
  isAnonymous?: boolean
  isSsoUser?: boolean
  emailConfirmedAt?: Date | null
  phoneConfirmedAt?: Date | null
  invitedAt?: Date | null
  bannedUntil?: Date | null
  now: Date
}

export async function insertUser(q: Queryable, u: NewUser): Promise<UserRow> {
  const r = await q.query<UserRow>(
    `INSERT INTO auth.users AS u (instance_id, id, aud, role, email, phone, encrypted_password, raw_app_meta_data,
        raw_user_meta_data, is_anonymous, is_sso_user, email_confirmed_at, phone_confirmed_at, invited_at, banned_until,
        created_at, updated_at, confirmation_token, recovery_token, email_change_token_new, email_change,
        email_change_token_current, email_change_confirm_status, phone_change, phone_change_token, reauthentication_token)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, '', '', '', '', '', 0, '', '', '')
     RETURNING ${USER_SELECT}`,
    [
      NIL_UUID,
      u.id,
      u.aud,
      u.role,
      u.email ?? null,
      u.phone ?? null,
      u.encryptedPassword ?? '',
      JSON.stringify(u.appMetadata),
      JSON.stringify(u.userMetadata),
      u.isAnonymous ?? false,
      u.isSsoUser ?? false,
      u.emailConfirmedAt ?? null,
      u.phoneConfirmedAt ?? null,
      u.invitedAt ?? null,
      u.bannedUntil ?? null,
      u.now,
    ],
  )
  return r.rows[0]!
}

/** Sets columns of one user (names from the allow-list, jsonb values serialised). */
export async function updateUser(
  q: Queryable,
  id: string,
  fields: Partial<Record<UserColumn, unknown>>,
  now: Date,
): Promise<UserRow> {
  const sets: string[] = []
  const values: unknown[] = [id]
  for (const [col, value] of Object.entries(fields)) {
    if (value === undefined) continue
    if (!WRITABLE.has(col) || col === 'id') throw new TypeError(`not a writable auth.users column: ${col}`)
    values.push(col === 'raw_app_meta_data' || col === 'raw_user_meta_data' ? JSON.stringify(value) : value)
    sets.push(`${quoteIdent(col)} = $${values.length}`)
  }
  values.push(now)
  sets.push(`updated_at = $${values.length}`)
  const r = await q.query<UserRow>(
    `UPDATE auth.users AS u SET ${sets.join(', ')} WHERE u.id = $1 RETURNING ${USER_SELECT}`,
    values,
  )
  if (!r.rows[0]) throw new Error('user vanished during update')
  return r.rows[0]
}

export async function deleteUser(q: Queryable, id: string): Promise<boolean> {
  const r = await q.query('DELETE FROM auth.users WHERE id = $1', [id])
  return (r.rowCount ?? 0) > 0
}

export async function loadUserWithIdentities(q: Queryable, id: string): Promise<UserWithIdentities | null> {
  const user = await findUserById(q, id)
  if (!user) return null
  // One after another: q may be a transaction's client, which runs one query at a time.
  const identities = await identitiesForUser(q, id)
  const factors = await factorsOfUser(q, id)
  return { user, identities, factors }
}

interface ListUsersOptions {
  aud: string
  page: number
  perPage: number
  filter?: string
  sortDesc: boolean
}

/** One page of users of an audience with the total count (admin list, docs/auth-protocol.md §3.20). */
export async function listUsers(
  q: Queryable,
  o: ListUsersOptions,
): Promise<{ users: UserWithIdentities[]; total: number }> {
  const filter = o.filter ? '%' + o.filter.replace(/[\\%_]/g, (m) => '\\' + m) + '%' : null
  const where = `u.instance_id = $1 AND u.aud = $2 AND ($3::text IS NULL OR u.email ILIKE $3 OR u.raw_user_meta_data->>'full_name' ILIKE $3)`
  const dir = o.sortDesc ? 'DESC' : 'ASC'
  const rows = await q.query<UserRow>(
    `SELECT ${USER_SELECT} FROM auth.users u WHERE ${where} ORDER BY u.created_at ${dir}, u.id ${dir} LIMIT $4 OFFSET $5`,
    [NIL_UUID, o.aud, filter, o.perPage, (o.page - 1) * o.perPage],
  )
  const count = await q.query<{ n: string }>(`SELECT pg_catalog.count(*)::text AS n FROM auth.users u WHERE ${where}`, [
    NIL_UUID,
    o.aud,
    filter,
  ])
  const identities = await identitiesOfUsers(
    q,
    rows.rows.map((u) => u.id),
  )
  return {
    users: rows.rows.map((user) => ({ user, identities: identities.filter((i) => i.user_id === user.id) })),
    total: Number(count.rows[0]?.n ?? 0),
  }
}

export function isUserBanned(u: UserRow, now: Date): boolean {
  return u.banned_until !== null && u.banned_until.getTime() > now.getTime()
}

/** app_metadata.providers: distinct identity providers by identity creation order (docs/auth-protocol.md §2.1). */
export function providersOf(identities: IdentityRow[]): string[] {
  const sorted = [...identities].sort((a, b) => (a.created_at?.getTime() ?? 0) - (b.created_at?.getTime() ?? 0))
  const out: string[] = []
  for (const i of sorted) if (!out.includes(i.provider)) out.push(i.provider)
  return out
}

function ts(d: Date | null | undefined): string | undefined {
  return d ? isoString(d) : undefined
}

/** The User object of docs/auth-protocol.md §2.1: optional timestamps omitted when null, email/phone never null. */
export function toUserJson({ user: u, identities, factors }: UserWithIdentities): UserJson {
  const out: Record<string, unknown> = {
    id: u.id,
    aud: u.aud ?? '',
    role: u.role ?? '',
    email: u.email ?? '',
    email_confirmed_at: ts(u.email_confirmed_at),
    phone: u.phone ?? '',
    phone_confirmed_at: ts(u.phone_confirmed_at),
    confirmation_sent_at: ts(u.confirmation_sent_at),
    confirmed_at: ts(u.confirmed_at),
    recovery_sent_at: ts(u.recovery_sent_at),
    new_email: u.email_change || undefined,
    email_change_sent_at: ts(u.email_change_sent_at),
    new_phone: u.phone_change || undefined,
    phone_change_sent_at: ts(u.phone_change_sent_at),
    reauthentication_sent_at: ts(u.reauthentication_sent_at),
    invited_at: ts(u.invited_at),
    last_sign_in_at: ts(u.last_sign_in_at),
    app_metadata: u.raw_app_meta_data ?? {},
    user_metadata: u.raw_user_meta_data ?? {},
    identities: identities.map(toIdentityJson),
    factors: factors && factors.length > 0 ? factors.map(toFactorJson) : undefined,
    created_at: ts(u.created_at),
    updated_at: ts(u.updated_at),
    banned_until: ts(u.banned_until),
    deleted_at: ts(u.deleted_at),
    is_anonymous: u.is_anonymous,
  }
  return definedOnly(out) as UserJson
}
