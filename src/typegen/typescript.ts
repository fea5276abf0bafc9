// Renders a Catalog as the TypeScript `supabase gen types typescript` writes (postgres-meta's
// typescript template, supabase/postgres-meta src/server/templates/typescript.ts, read as the
// reference): `Json`, `Database` with Tables/Views/Functions/Enums/CompositeTypes per schema,
// the helper types and `Constants`. What postgrest-js reads from it (Row/Insert/Update,
// Relationships with isOneToOne, function Args/Returns/SetofOptions) follows the same rules.
// Pure: the catalog comes in, text goes out.
import {
  byName,
  type Catalog,
  type CatalogArg,
  type CatalogColumn,
  type CatalogFunction,
  type CatalogRelation,
  type CatalogRelationship,
  type CatalogType,
} from './catalog.js'
import { inlineObject, key, object, print, str, text, tuple, union, type Doc, type Member } from './doc.js'
import { helperTypes } from './helpers.js'

export interface TypescriptOptions {
  /** Written as `__InternalSupabase.PostgrestVersion` (postgrest-js picks its features by it). */
  readonly postgrestVersion?: string
  /** The schema the helper types default to (postgres-meta: `public`). */
  readonly defaultSchema?: string
}

interface FnEntry {
  readonly fn: CatalogFunction
  /** IN, INOUT and VARIADIC arguments, by name. */
  readonly inArgs: readonly CatalogArg[]
}

interface SchemaParts {
  readonly tables: CatalogRelation[]
  readonly views: CatalogRelation[]
  readonly functions: FnEntry[]
  readonly enums: CatalogType[]
  readonly composites: CatalogType[]
}

const NUMBER = new Set(['int2', 'int4', 'int8', 'float4', 'float8', 'numeric'])
const STRING = new Set([
  'bytea',
  'bpchar',
  'varchar',
  'date',
  'text',
  'citext',
  'time',
  'timetz',
  'timestamp',
  'timestamptz',
  'uuid',
  'vector',
  'interval',
])
/** json, jsonb and text: the types an unnamed argument may have (PostgREST passes the body). */
const UNNAMED_ARG_TYPES = new Set([114, 3802, 25])
const IN_MODES = new Set(['in', 'inout', 'variadic'])

const WIDTH = 80

/** `{ error: true } & "message"`, the object broken when the line would be too long. */
function errorType(message: string, column: number): Doc {
  const line = `{ error: true } & ${str(message)}`
  return column + line.length <= WIDTH ? [line] : ['{', '  error: true', `} & ${str(message)}`]
}

/** An array of a type, parenthesised only where the element type needs it. */
const arrayOf = (element: string): string =>
  /^[\w$.]+$|^Database(\[[^\]]+\])+$/.test(element) ? `${element}[]` : `(${element})[]`

const orNull = (type: string, nullable: boolean): string =>
  nullable && type !== 'unknown' && type !== 'any' ? `${type} | null` : type

/** Renders the Database type of `catalog` (see the module header). */
export function renderTypescript(catalog: Catalog, opts: TypescriptOptions = {}): string {
  return new TypescriptRenderer(catalog).render(opts)
}

class TypescriptRenderer {
  readonly #catalog: Catalog
  readonly #typesById = new Map<number, CatalogType>()
  readonly #rowTypes = new Map<number, CatalogType>()
  readonly #columns = new Map<number, CatalogColumn[]>()
  readonly #relationNames = new Map<number, string>()
  readonly #relationships = new Map<string, CatalogRelationship[]>()
  readonly #schemas = new Map<string, SchemaParts>()

  constructor(catalog: Catalog) {
    this.#catalog = catalog
    for (const s of catalog.schemas)
      this.#schemas.set(s, { tables: [], views: [], functions: [], enums: [], composites: [] })
    this.#indexTypes()
    this.#indexRelations()
    this.#indexFunctions()
  }

  #indexTypes(): void {
    for (const t of this.#catalog.types) {
      this.#typesById.set(t.id, t)
      if (t.relationId !== null) this.#rowTypes.set(t.id, t)
      const parts = this.#schemas.get(t.schema)
      if (parts && t.enums.length > 0) parts.enums.push(t)
      if (parts && t.attributes.length > 0) parts.composites.push(t)
    }
  }

  #indexRelations(): void {
    for (const r of this.#catalog.relations) {
      this.#columns.set(r.id, [])
      this.#relationNames.set(r.id, r.name)
      const parts = this.#schemas.get(r.schema)
      if (parts) (r.kind === 'table' || r.kind === 'foreign-table' ? parts.tables : parts.views).push(r)
    }
    for (const c of this.#catalog.columns) this.#columns.get(c.relationId)?.push(c)
    for (const list of this.#columns.values()) list.sort((a, b) => byName(a.name, b.name))
    const rels = [...this.#catalog.relationships].sort(
      (a, b) =>
        byName(a.foreignKeyName, b.foreignKeyName) ||
        byName(a.referencedRelation, b.referencedRelation) ||
        byName(JSON.stringify(a.referencedColumns), JSON.stringify(b.referencedColumns)),
    )
    for (const r of rels) {
      if (r.referencedSchema !== r.schema) continue
      const k = JSON.stringify([r.schema, r.relation])
      this.#relationships.set(k, [...(this.#relationships.get(k) ?? []), r])
    }
  }

  #indexFunctions(): void {
    for (const fn of this.#catalog.functions) {
      const parts = this.#schemas.get(fn.schema)
      if (!parts) continue
      const sorted = { ...fn, args: [...fn.args].sort((a, b) => byName(a.name, b.name)) }
      const inArgs = sorted.args.filter((a) => IN_MODES.has(a.mode))
      if (this.#callable(inArgs)) parts.functions.push({ fn: sorted, inArgs })
    }
    for (const parts of this.#schemas.values()) {
      parts.tables.sort((a, b) => byName(a.name, b.name))
      parts.views.sort((a, b) => byName(a.name, b.name))
      parts.functions.sort((a, b) => byName(a.fn.name, b.fn.name))
      parts.enums.sort((a, b) => byName(a.name, b.name))
      parts.composites.sort((a, b) => byName(a.name, b.name))
    }
  }

  /** The functions postgres-meta lists: those PostgREST can call, and table-row ones it reports. */
  #callable(inArgs: readonly CatalogArg[]): boolean {
    if (inArgs.length === 0 || inArgs.every((a) => a.name !== '')) return true
    if (inArgs.every((a) => a.name !== '' || (a.hasDefault && UNNAMED_ARG_TYPES.has(a.typeId)))) return true
    const only = inArgs.length === 1 ? inArgs[0] : undefined
    return (
      only !== undefined && only.name === '' && (UNNAMED_ARG_TYPES.has(only.typeId) || this.#rowTypes.has(only.typeId))
    )
  }

  render(opts: TypescriptOptions): string {
    const members: Member[] = []
    if (opts.postgrestVersion !== undefined) {
      members.push({
        key: '__InternalSupabase',
        type: object([{ key: 'PostgrestVersion', type: text(str(opts.postgrestVersion)) }]),
      })
    }
    for (const schema of this.#catalog.schemas) members.push({ key: schema, type: this.#schemaType(schema) })
    const database = object(members)
    const internal =
      opts.postgrestVersion === undefined
        ? database
        : [
            database[0],
            '  // Allows to automatically instantiate createClient with right options',
            "  // instead of createClient<Database, { PostgrestVersion: 'XX' }>(URL, KEY)",
            ...database.slice(1),
          ]
    return (
      [
        'export type Json =\n  | string\n  | number\n  | boolean\n  | null\n  | { [key: string]: Json | undefined }\n  | Json[]',
        `export type Database = ${print(internal)}`,
        helperTypes(opts.defaultSchema ?? 'public'),
        `export const Constants = ${print(this.#constants())} as const`,
      ].join('\n\n') + '\n'
    )
  }

  #schemaType(schema: string): Doc {
    const parts = this.#schemas.get(schema) as SchemaParts
    return object([
      { key: 'Tables', type: object(parts.tables.map((t) => ({ key: t.name, type: this.#tableType(schema, t) }))) },
      { key: 'Views', type: object(parts.views.map((v) => ({ key: v.name, type: this.#viewType(schema, v) }))) },
      { key: 'Functions', type: this.#functionsType(schema, parts.functions) },
      {
        key: 'Enums',
        type: object(
          parts.enums.map((e) => ({
            key: e.name,
            type: union(
              e.enums.map((v) => text(str(v))),
              6 + key(e.name).length + 2,
            ),
          })),
        ),
      },
      {
        key: 'CompositeTypes',
        type: object(parts.composites.map((c) => ({ key: c.name, type: this.#compositeType(schema, c) }))),
      },
    ])
  }

  #tableType(schema: string, table: CatalogRelation): Doc {
    const columns = this.#columns.get(table.id) ?? []
    const never = (c: CatalogColumn): Member | null =>
      c.identityAlways ? { key: c.name, optional: true, type: text('never') } : null
    return object([
      { key: 'Row', type: this.#rowType(schema, table) },
      {
        key: 'Insert',
        type: object(columns.map((c) => never(c) ?? this.#column(schema, c, c.nullable || c.identity || c.hasDefault))),
      },
      { key: 'Update', type: object(columns.map((c) => never(c) ?? this.#column(schema, c, true))) },
      { key: 'Relationships', type: this.#relationshipsType(schema, table) },
    ])
  }

  #viewType(schema: string, view: CatalogRelation): Doc {
    const members: Member[] = [{ key: 'Row', type: this.#rowType(schema, view) }]
    if (view.updatable) {
      const columns = this.#columns.get(view.id) ?? []
      const writable = (c: CatalogColumn): Member =>
        c.updatable
          ? this.#column(schema, { ...c, nullable: true }, true)
          : { key: c.name, optional: true, type: text('never') }
      members.push(
        { key: 'Insert', type: object(columns.map(writable)) },
        { key: 'Update', type: object(columns.map(writable)) },
      )
    }
    members.push({ key: 'Relationships', type: this.#relationshipsType(schema, view) })
    return object(members)
  }

  /** A relation's columns and its computed fields (functions taking its row). */
  #rowType(schema: string, relation: CatalogRelation): Doc {
    const parts = this.#schemas.get(schema) as SchemaParts
    const computed = parts.functions
      .filter(({ fn }) => fn.argumentTypes === relation.name)
      .map(({ fn }): Member => ({ key: fn.name, type: this.#nullable(this.#returnType(schema, fn)) }))
    return object([...(this.#columns.get(relation.id) ?? []).map((c) => this.#column(schema, c, false)), ...computed])
  }

  #nullable(doc: Doc): Doc {
    if (doc.length !== 1) return [...doc.slice(0, -1), `${doc[doc.length - 1] ?? ''} | null`]
    return [orNull(doc[0] ?? 'unknown', true)]
  }

  #column(schema: string, c: CatalogColumn, optional: boolean): Member {
    return { key: c.name, optional, type: text(orNull(this.#tsType(schema, c.format), c.nullable)) }
  }

  #relationshipsType(schema: string, relation: CatalogRelation): Doc {
    const list = this.#relationships.get(JSON.stringify([schema, relation.name])) ?? []
    return tuple(
      list.map((r) =>
        object([
          { key: 'foreignKeyName', type: text(str(r.foreignKeyName)) },
          { key: 'columns', type: text(`[${r.columns.map(str).join(', ')}]`) },
          { key: 'isOneToOne', type: text(String(r.isOneToOne)) },
          { key: 'referencedRelation', type: text(str(r.referencedRelation)) },
          { key: 'referencedColumns', type: text(`[${r.referencedColumns.map(str).join(', ')}]`) },
        ]),
      ),
    )
  }

  #compositeType(schema: string, type: CatalogType): Doc {
    return object(
      type.attributes.map((a) => ({ key: a.name, type: text(orNull(this.#tsTypeOf(schema, a.typeId), true)) })),
    )
  }

  /** Functions sit at column 6 of the output (Database > schema > Functions > name). */
  #functionsType(schema: string, functions: readonly FnEntry[]): Doc {
    const byFnName = new Map<string, FnEntry[]>()
    for (const entry of functions) byFnName.set(entry.fn.name, [...(byFnName.get(entry.fn.name) ?? []), entry])
    const members: Member[] = []
    for (const [name, entries] of byFnName) {
      entries.sort((a, b) => byName(a.fn.argumentTypes, b.fn.argumentTypes) || byName(a.fn.returnType, b.fn.returnType))
      const type =
        entries.length === 1
          ? this.#signature(schema, entries, entries[0] as FnEntry, 6 + key(name).length + 2, 8)
          : union(
              entries.map((e) => this.#signature(schema, entries, e, 10, 12)),
              WIDTH,
            )
      members.push({ key: name, type })
    }
    return object(members)
  }

  /** `{ Args; Returns; SetofOptions? }`, on one line when it fits from `column` on. */
  #signature(schema: string, group: readonly FnEntry[], entry: FnEntry, column: number, memberColumn: number): Doc {
    const { fn, inArgs } = entry
    const args: Doc =
      inArgs.length === 0
        ? text('never')
        : inlineObject(
            inArgs.map((a) => this.#arg(schema, a)),
            memberColumn + 6,
          )
    const error =
      this.#conflict(schema, group, entry) ??
      (this.#rowArgWithoutTable(entry)
        ? `the function ${schema}.${fn.name} with parameter or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache`
        : null)
    const returns: Doc = error === null ? this.#returnType(schema, fn) : errorType(error, memberColumn + 9)
    return inlineObject([{ key: 'Args', type: args }, ...this.#returns(fn, returns)], column)
  }

  #arg(schema: string, a: CatalogArg): Member {
    return { key: a.name, optional: a.hasDefault, type: text(this.#tsTypeOf(schema, a.typeId)) }
  }

  /** `Returns` (an array for a set of several rows) and `SetofOptions` where postgrest-js needs them. */
  #returns(fn: CatalogFunction, returnType: Doc): Member[] {
    const target = this.#returnTableName(fn)
    const manyRows = fn.rows !== null && fn.rows > 1
    let setof: { from: string; isOneToOne: boolean; isSetofReturn: boolean } | null =
      target === null ? null : { from: '*', isOneToOne: !manyRows, isSetofReturn: fn.returnsSet }
    const source = fn.args.length === 1 ? this.#rowTypes.get(fn.args[0]?.typeId ?? 0) : undefined
    if (source !== undefined && target !== null) {
      const setOfTable = fn.returnsSet && fn.returnRelationId !== null
      setof = setOfTable
        ? { from: source.format, isOneToOne: !manyRows, isSetofReturn: true }
        : { from: source.format, isOneToOne: true, isSetofReturn: false }
    }
    const asArray = fn.returnsSet && !(!manyRows && target !== null)
    const returns: Doc = asArray
      ? [...returnType.slice(0, -1), `${returnType[returnType.length - 1] ?? ''}[]`]
      : returnType
    const members: Member[] = [{ key: 'Returns', type: returns }]
    if (setof !== null && target !== null) {
      members.push({
        key: 'SetofOptions',
        type: object([
          { key: 'from', type: text(str(setof.from)) },
          { key: 'to', type: text(str(target)) },
          { key: 'isOneToOne', type: text(String(setof.isOneToOne)) },
          { key: 'isSetofReturn', type: text(String(setof.isSetofReturn)) },
        ]),
      })
    }
    return members
  }

  /** The relation (or composite type) name a function returns rows of, null for other returns. */
  #returnTableName(fn: CatalogFunction): string | null {
    if (fn.returnRelationId === null) return null
    return this.#relationNames.get(fn.returnRelationId) ?? this.#rowTypes.get(fn.returnTypeId)?.name ?? null
  }

  #rowArgWithoutTable({ fn, inArgs }: FnEntry): boolean {
    const only = inArgs.length === 1 ? inArgs[0] : undefined
    return (
      only !== undefined && only.name === '' && this.#rowTypes.has(only.typeId) && this.#returnTableName(fn) === null
    )
  }

  /** Overloads PostgREST cannot choose between, as postgres-meta reports them. */
  #conflict(schema: string, group: readonly FnEntry[], { fn, inArgs }: FnEntry): string | null {
    if (group.length <= 1) return null
    const tail =
      '. Try renaming the parameters or the function itself in the database so function overloading can be resolved'
    if (inArgs.length === 0) {
      const other = group.find(
        (o) => o.fn !== fn && o.inArgs.length === 1 && o.inArgs[0]?.name === '' && o.inArgs[0]?.hasDefault,
      )
      if (other === undefined) return null
      const ret = this.#typesById.get(other.fn.returnTypeId)?.name ?? 'unknown'
      return `Could not choose the best candidate function between: ${schema}.${fn.name}(), ${schema}.${fn.name}( => ${ret})${tail}`
    }
    const arg = inArgs.length === 1 ? inArgs[0] : undefined
    if (arg === undefined || arg.name === '') return null
    const others = group.filter(
      (o) =>
        o.fn !== fn && o.inArgs.length === 1 && o.inArgs[0]?.name === arg.name && o.inArgs[0]?.typeId !== arg.typeId,
    )
    if (others.length === 0) return null
    const list = [{ fn, inArgs }, ...others]
      .sort((a, b) => (a.inArgs[0]?.typeId ?? 0) - (b.inArgs[0]?.typeId ?? 0))
      .map(
        (o) =>
          `${schema}.${fn.name}(${o.inArgs.map((a) => `${a.name} => ${this.#typesById.get(a.typeId)?.name ?? 'unknown'}`).join(', ')})`,
      )
    return `Could not choose the best candidate function between: ${list.join(', ')}${tail}`
  }

  /** What a function returns: its TABLE columns, a relation's row, or its type. */
  #returnType(schema: string, fn: CatalogFunction): Doc {
    const tableArgs = fn.args.filter((a) => a.mode === 'table')
    if (tableArgs.length > 0) {
      return object(tableArgs.map((a) => ({ key: a.name, type: text(this.#tsTypeOf(schema, a.typeId)) })))
    }
    const parts = this.#schemas.get(schema) as SchemaParts
    const relation = [...parts.tables, ...parts.views].find((r) => r.id === fn.returnRelationId)
    if (relation !== undefined)
      return object((this.#columns.get(relation.id) ?? []).map((c) => this.#column(schema, c, false)))
    return text(this.#tsTypeOf(schema, fn.returnTypeId))
  }

  /** A type by OID as TypeScript (`unknown` when the catalog does not have it). */
  #tsTypeOf(schema: string, typeId: number): string {
    const t = this.#typesById.get(typeId)
    return t === undefined ? 'unknown' : this.#tsType(schema, t.name)
  }

  /** A Postgres type name as TypeScript (postgres-meta's pgTypeToTsType). */
  #tsType(schema: string, pgType: string): string {
    if (pgType === 'bool') return 'boolean'
    if (NUMBER.has(pgType)) return 'number'
    if (STRING.has(pgType)) return 'string'
    if (pgType === 'json' || pgType === 'jsonb') return 'Json'
    if (pgType === 'void') return 'undefined'
    if (pgType === 'record') return 'Record<string, unknown>'
    if (pgType.startsWith('_')) return arrayOf(this.#tsType(schema, pgType.slice(1)))
    return this.#namedType(schema, pgType)
  }

  /** An enum, composite type, table or view row by name: this schema's first, else any. */
  #namedType(schema: string, pgType: string): string {
    const pick = <T extends { schema: string }>(list: T[]): T | undefined =>
      list.find((x) => x.schema === schema) ?? list[0]
    const types = this.#catalog.types.filter((t) => t.name === pgType)
    const enumType = pick(types.filter((t) => t.enums.length > 0))
    if (enumType !== undefined) {
      return this.#schemas.has(enumType.schema)
        ? `Database[${str(enumType.schema)}]["Enums"][${str(enumType.name)}]`
        : enumType.enums.map(str).join(' | ')
    }
    const composite = pick(types.filter((t) => t.attributes.length > 0))
    if (composite !== undefined) return this.#ref(composite.schema, 'CompositeTypes', composite.name, '')
    const relations = this.#catalog.relations.filter((r) => r.name === pgType)
    const table = pick(relations.filter((r) => r.kind === 'table'))
    if (table !== undefined) return this.#ref(table.schema, 'Tables', table.name, '["Row"]')
    const view = pick(relations.filter((r) => r.kind === 'view'))
    if (view !== undefined) return this.#ref(view.schema, 'Views', view.name, '["Row"]')
    return 'unknown'
  }

  #ref(schema: string, section: string, name: string, suffix: string): string {
    return this.#schemas.has(schema) ? `Database[${str(schema)}][${str(section)}][${str(name)}]${suffix}` : 'unknown'
  }

  #constants(): Doc {
    const lines = ['{']
    for (const schema of this.#catalog.schemas) {
      const enums = (this.#schemas.get(schema) as SchemaParts).enums
      lines.push(`  ${key(schema)}: {`, '    Enums: {' + (enums.length === 0 ? '},' : ''))
      for (const e of enums) lines.push(`      ${key(e.name)}: [${e.enums.map(str).join(', ')}],`)
      if (enums.length > 0) lines.push('    },')
      lines.push('  },')
    }
    lines.push('}')
    return lines
  }
}
