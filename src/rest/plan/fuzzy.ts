// Approximate string matching for the "Perhaps you meant ..." hints of PostgREST's errors,
// which use a fuzzy string set: entries are indexed by their character bigrams and
// trigrams (lower-cased, only letters, digits, spaces and commas, padded with `-`); a query
// is scored by cosine similarity of gram counts (trigrams first, bigrams when no trigram is
// shared), the best 50 are re-scored by normalized Levenshtein similarity, and those at or
// over the minimum score are returned best first. Pure.

const GRAM_SIZES = [3, 2] as const

function normalize(s: string): string {
  return s.toLowerCase().replace(/[^\p{L}\p{N}\s,]/gu, '')
}

function grams(value: string, size: number): Map<string, number> {
  let padded = '-' + normalize(value) + '-'
  while (padded.length < size) padded += '-'
  const chars = [...padded]
  const out = new Map<string, number>()
  for (let i = 0; i + size <= chars.length; i++) {
    const g = chars.slice(i, i + size).join('')
    out.set(g, (out.get(g) ?? 0) + 1)
  }
  return out
}

function norm(counts: Iterable<number>): number {
  let sum = 0
  for (const c of counts) sum += c * c
  return Math.sqrt(sum)
}

function levenshtein(a: string, b: string): number {
  const x = [...a]
  const y = [...b]
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j)
  for (let i = 1; i <= x.length; i++) {
    const cur = [i]
    for (let j = 1; j <= y.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1))
    }
    prev = cur
  }
  return prev[y.length]
}

function similarity(a: string, b: string): number {
  const len = Math.max([...a].length, [...b].length)
  return len === 0 ? 1 : 1 - levenshtein(a, b) / len
}

interface Item {
  readonly key: string
  readonly value: string
  readonly norms: ReadonlyMap<number, number>
}

/** A set of strings to look approximate matches up in. */
export class FuzzySet {
  private readonly items: Item[] = []
  private readonly exact = new Map<string, string>()
  /** By gram size: gram -> [item, count] of the items that have it. */
  private readonly index = new Map(GRAM_SIZES.map((size) => [size, new Map<string, Array<[number, number]>>()]))

  constructor(values: Iterable<string> = []) {
    for (const v of values) this.add(v)
  }

  add(value: string): void {
    const key = value.toLowerCase()
    if (this.exact.has(key)) return
    this.exact.set(key, value)
    const at = this.items.length
    const norms = new Map<number, number>()
    for (const size of GRAM_SIZES) {
      const counts = grams(value, size)
      norms.set(size, norm(counts.values()))
      const bySize = this.index.get(size)!
      for (const [g, n] of counts) {
        const list = bySize.get(g)
        if (list) list.push([at, n])
        else bySize.set(g, [[at, n]])
      }
    }
    this.items.push({ key, value, norms })
  }

  /** Matches scoring at least `minScore`, best first. */
  get(query: string, minScore = 0.33): Array<{ score: number; value: string }> {
    const key = query.toLowerCase()
    const hit = this.exact.get(key)
    if (hit !== undefined) return [{ score: 1, value: hit }]
    for (const size of GRAM_SIZES) {
      const counts = grams(query, size)
      const dots = new Map<number, number>()
      for (const [g, n] of counts) {
        for (const [at, m] of this.index.get(size)?.get(g) ?? []) dots.set(at, (dots.get(at) ?? 0) + n * m)
      }
      if (dots.size === 0) continue
      const qNorm = norm(counts.values())
      const byCosine = [...dots]
        .map(([at, dot]) => ({ item: this.items[at], score: dot / (qNorm * (this.items[at].norms.get(size) ?? 1)) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 50)
      const rescored = byCosine
        .map(({ item }) => ({ score: similarity(item.key, key), value: item.value }))
        .sort((a, b) => b.score - a.score)
      return rescored.filter((r) => r.score >= minScore)
    }
    return []
  }

  /** The best match scoring at least `minScore`, or null. */
  getOne(query: string, minScore = 0.33): string | null {
    return this.get(query, minScore)[0]?.value ?? null
  }
}
