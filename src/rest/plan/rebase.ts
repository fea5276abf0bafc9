// Re-rooting a read tree on a CTE: the representation of a write and the rows
// of an RPC are selected `FROM "pgrst_source" AS "<alias>"`, so the root and the join
// conditions of its embeds must name that alias instead of the schema-qualified table.
// Also: which columns of the root a tree reads (the RETURNING list of a write). Pure.
import type { Condition, JoinCondition, Qualifier, ReadNode } from './types.js'

function isRoot(q: Qualifier, root: ReadNode): boolean {
  return q.kind === 'table' && q.schema === root.from.schema && q.name === root.from.name
}

/** The tree with its root aliased `alias`; embeds join on `"<alias>"."col"`. */
export function rebaseRoot(tree: ReadNode, alias: string): ReadNode {
  if (tree.alias !== null) return tree
  const swap = (q: Qualifier): Qualifier => (isRoot(q, tree) ? { kind: 'alias', name: alias } : q)
  const children = tree.children.map((c) => {
    // A many-to-many embed names its junction and target as tables; only the side that
    // joins to the parent moves (the pairs of columns1 come last, see read-plan addRels).
    const jc: JoinCondition[] = c.joinConditions.map((j) => ({
      left: [swap(j.left[0]), j.left[1]] as const,
      right: [swap(j.right[0]), j.right[1]] as const,
    }))
    if (c.junction !== null && c.relationship?.cardinality.kind === 'm2m') {
      const n2 = c.relationship.cardinality.junction.columns2.length
      // Target-side pairs keep their table qualifier even when the target is the root's table.
      for (let i = 0; i < n2 && i < jc.length; i++) jc[i] = c.joinConditions[i]
    }
    // A computed relationship takes the root's row by name: now the alias.
    const computed =
      c.computed !== null && c.computed.parent === tree.from.name ? { ...c.computed, parent: alias } : c.computed
    return { ...c, joinConditions: jc, computed }
  })
  return { ...tree, alias, children }
}

/**
 * The root's columns the tree reads: its selected fields and the columns its embeds join
 * on. null = every column (`*`, nothing selected, or a computed relationship embedded).
 */
export function rootColumns(tree: ReadNode): string[] | null {
  const own = tree.select.map((s) => s.field.name)
  if (own.includes('*') || (tree.select.length === 0 && tree.children.length === 0)) return null
  // A computed relationship takes the whole row: its columns cannot be known (as PostgREST).
  if (tree.children.some((c) => c.computed !== null)) return null
  const cols = new Set(own)
  for (const c of tree.children) {
    for (const j of c.joinConditions) {
      if (isRoot(j.left[0], tree)) cols.add(j.left[1])
      if (isRoot(j.right[0], tree)) cols.add(j.right[1])
    }
  }
  return [...cols]
}

function conditionFields(c: Condition): string[] {
  if (c.kind === 'filter') return [c.field.name]
  if (c.kind === 'null-embed') return [c.child.relAlias ?? c.child.relName]
  return c.children.flatMap(conditionFields)
}

function treeFilterFields(n: ReadNode): string[] {
  return [...n.where.flatMap(conditionFields), ...n.children.flatMap(treeFilterFields)]
}

/**
 * The columns a function call hands to its read (PostgREST's returnings plus filter
 * fields): the root's selected fields, the columns its embeds join on, and the field of
 * every filter of the tree; null = all of them (`*` selected, a computed relationship
 * embedded, or nothing named). Selecting them from the call's own row lets a computed
 * column be read off a function's result, and makes a missing column read `pgrst_call.x`.
 */
export function callColumns(tree: ReadNode): string[] | null {
  const names = new Set(tree.select.map((s) => s.field.name))
  if (names.has('*') || tree.children.some((c) => c.computed !== null)) return null
  for (const c of tree.children) {
    const card = c.relationship?.cardinality
    if (card === undefined || card.kind === 'computed') continue
    const pairs = card.kind === 'm2m' ? card.junction.columns1 : card.columns
    for (const [col] of pairs) names.add(col)
  }
  if (names.size === 0) return null
  for (const f of treeFilterFields(tree)) names.add(f)
  return [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}
