// The helper types that follow `Database` in postgres-meta's output (Tables, TablesInsert,
// TablesUpdate, Enums, CompositeTypes): generic look-ups into Database that take a name of
// the default schema or `{ schema }` and a name. Same declarations, laid out as prettier does.
import { str } from './doc.js'

interface Lookup {
  readonly name: string
  readonly param: string
  readonly nameParam: string
  /** The sections searched: one (`Tables`) or two intersected (`Tables` & `Views`). */
  readonly sections: readonly string[]
  /** `Row`/`Insert`/`Update` with its inferred letter; none for enums and composite types. */
  readonly member?: readonly [string, string]
}

const W = 'DatabaseWithoutInternals'

function sectionsOf(base: string, sections: readonly string[], breakIndent: string | null): string {
  if (sections.length === 1) return `${base}[${str(sections[0] ?? '')}]`
  const parts = sections.map((s) => `${base}[${str(s)}]`)
  return `(${parts.join(breakIndent === null ? ' & ' : ` &\n${breakIndent}`)})`
}

function pick(target: string, member: Lookup['member'], indent: string): string {
  if (member === undefined) return target
  const [key, letter] = member
  return `${target} extends {\n${indent}  ${key}: infer ${letter}\n${indent}}\n${indent}? ${letter}\n${indent}: never`
}

function lookup(l: Lookup): string {
  const own = `${W}[${l.param}["schema"]]`
  const keyofOwn =
    l.sections.length === 1
      ? `keyof ${sectionsOf(own, l.sections, null)}`
      : `keyof ${sectionsOf(own, l.sections, '        ')}`
  const withSchema = pick(`${sectionsOf(own, l.sections, '      ')}[${l.nameParam}]`, l.member, '    ')
  const withDefault = pick(`${sectionsOf('DefaultSchema', l.sections, null)}[${l.param}]`, l.member, '      ')
  return `export type ${l.name}<
  ${l.param} extends
    | keyof ${sectionsOf('DefaultSchema', l.sections, null)}
    | { schema: keyof ${W} },
  ${l.nameParam} extends ${l.param} extends {
    schema: keyof ${W}
  }
    ? ${keyofOwn}
    : never = never,
> = ${l.param} extends {
  schema: keyof ${W}
}
  ? ${withSchema}
  : ${l.param} extends keyof ${sectionsOf('DefaultSchema', l.sections, null)}
    ? ${withDefault}
    : never`
}

/** The helper types, defaulting to `schema`. */
export function helperTypes(schema: string): string {
  const table = { param: 'DefaultSchemaTableNameOrOptions', nameParam: 'TableName' }
  return [
    `type ${W} = Omit<Database, "__InternalSupabase">`,
    `type DefaultSchema = ${W}[Extract<keyof Database, ${str(schema)}>]`,
    lookup({ name: 'Tables', ...table, sections: ['Tables', 'Views'], member: ['Row', 'R'] }),
    lookup({ name: 'TablesInsert', ...table, sections: ['Tables'], member: ['Insert', 'I'] }),
    lookup({ name: 'TablesUpdate', ...table, sections: ['Tables'], member: ['Update', 'U'] }),
    lookup({ name: 'Enums', param: 'DefaultSchemaEnumNameOrOptions', nameParam: 'EnumName', sections: ['Enums'] }),
    lookup({
      name: 'CompositeTypes',
      param: 'PublicCompositeTypeNameOrOptions',
      nameParam: 'CompositeTypeName',
      sections: ['CompositeTypes'],
    }),
  ].join('\n\n')
}
