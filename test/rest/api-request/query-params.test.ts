// Table-driven grammar tests (pure, no I/O): every rule of the read grammar with valid
// input and the AST it gives, and invalid input with the PGRST error it gives. Error
// texts are PostgREST 14's (its Parsec grammar, QueryParams.hs doctests): a character
// shown in single quotes is the one `eof` refused, in double quotes one a rule refused.
import t from 'tap'
import {
  parseFilterValue,
  parseLogicTree,
  parseOrder,
  parseQueryParams,
  parseSelect,
  parseColumns,
} from '../../../src/rest/api-request/index.js'
import { isGatehouseError } from '../../../src/shared/index.js'

const f = (name: string, jsonPath: unknown[] = []) => ({ name, jsonPath })
const key = (k: string, arrow = '->') => ({ arrow, operand: { kind: 'key', key: k } })
const idx = (i: string, arrow = '->') => ({ arrow, operand: { kind: 'idx', idx: i } })
const field = (name: string, extra: Record<string, unknown> = {}, jsonPath: unknown[] = []) => ({
  kind: 'field',
  field: f(name, jsonPath),
  alias: null,
  cast: null,
  aggregate: null,
  aggregateCast: null,
  ...extra,
})
const rel = (name: string, children: unknown[], extra: Record<string, unknown> = {}) => ({
  kind: 'relation',
  name,
  alias: null,
  hint: null,
  joinType: null,
  children,
  ...extra,
})
const spread = (name: string, children: unknown[], extra: Record<string, unknown> = {}) => ({
  kind: 'spread',
  name,
  hint: null,
  joinType: null,
  children,
  ...extra,
})

function failure(fn: () => unknown): { code: string; status: number; message: string; details: unknown } {
  try {
    fn()
  } catch (err) {
    if (!isGatehouseError(err)) throw err
    return { code: err.code, status: err.status, message: err.message, details: err.details }
  }
  throw new Error('expected a failure')
}

t.test('select: valid', async (t) => {
  const cases: Array<[string, unknown[]]> = [
    ['*', [field('*')]],
    ['', []],
    ['id,name', [field('id'), field('name')]],
    [' id , name ', [field('id'), field('name')]],
    ['first name', [field('first name')]],
    ['my-col', [field('my-col')]],
    ['$x,_y,123', [field('$x'), field('_y'), field('123')]],
    ['"a.b,c"', [field('a.b,c')]],
    ['"q\\"uote"', [field('q"uote')]],
    ['alias:id', [field('id', { alias: 'alias' })]],
    ['id::text', [field('id', { cast: 'text' })]],
    ['n:id::bigint', [field('id', { alias: 'n', cast: 'bigint' })]],
    ['data->a->>b', [field('data', {}, [key('a'), key('b', '->>')])]],
    ['data->0', [field('data', {}, [idx('+0')])]],
    ['data->-1', [field('data', {}, [idx('-1')])]],
    ['data->phones->0->>number', [field('data', {}, [key('phones'), idx('+0'), key('number', '->>')])]],
    ['a(data->0)', [rel('a', [field('data', {}, [key('0')])])]],
    ['id)', [field('id')]],
    ['*!hint', []],
    [':', []],
    ['...authors', []],
    ["name,projects(count)'", [field('name'), rel('projects', [field('count')])]],
    ['data->"a.b"', [field('data', {}, [key('a.b')])]],
    ['data->!@#$%^&*_a', [field('data', {}, [key('!@#$%^&*_a')])]],
    ['x:data->>a::int', [field('data', { alias: 'x', cast: 'int' }, [key('a', '->>')])]],
    ['authors(*)', [rel('authors', [field('*')])]],
    ['authors()', [rel('authors', [])]],
    ['a:authors(name)', [rel('authors', [field('name')], { alias: 'a' })]],
    ['authors!inner(name)', [rel('authors', [field('name')], { joinType: 'inner' })]],
    ['authors!left(name)', [rel('authors', [field('name')], { joinType: 'left' })]],
    ['authors!fk_name(name)', [rel('authors', [field('name')], { hint: 'fk_name' })]],
    ['authors!fk!inner(name)', [rel('authors', [field('name')], { hint: 'fk', joinType: 'inner' })]],
    ['a:authors!inner!fk(name)', [rel('authors', [field('name')], { alias: 'a', hint: 'fk', joinType: 'inner' })]],
    ['*,authors(*,books(title))', [field('*'), rel('authors', [field('*'), rel('books', [field('title')])])]],
    ['...authors(name)', [spread('authors', [field('name')])]],
    ['...authors!inner(a:name)', [spread('authors', [field('name', { alias: 'a' })], { joinType: 'inner' })]],
    ['count()', [field('*', { aggregate: 'count' })]],
    ['c:count()::int', [field('*', { aggregate: 'count', aggregateCast: 'int', alias: 'c' })]],
    ['price.sum()', [field('price', { aggregate: 'sum' })]],
    ['price::numeric.avg()::int', [field('price', { aggregate: 'avg', cast: 'numeric', aggregateCast: 'int' })]],
    ['count', [field('count')]],
  ]
  for (const [input, expected] of cases) t.same(parseSelect(input), expected, `select=${input}`)
})

t.test('select: invalid gives PGRST100 with the position and what was expected', async (t) => {
  const cases: Array<[string, number, string]> = [
    [
      'id,clients(name[])',
      16,
      'unexpected \'[\' expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input',
    ],
    ['name!hint', 5, 'unexpected \'!\' expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input'],
    ['name::', 7, 'unexpected end of input expecting letter or digit'],
    ['data->>-78xy', 11, 'unexpected \'x\' expecting digit, "->", "::", ".", "," or end of input'],
    ['data->(x', 7, 'unexpected "(" expecting "-", digit or any non reserved character different from: .,>()'],
    [
      'authors(name',
      13,
      'unexpected end of input expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input',
    ],
    [
      'authors!inner',
      8,
      'unexpected \'!\' expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input',
    ],
    ['a,,b', 3, 'unexpected "," expecting "...", field name (* or [a..z0..9_$]), "*" or "count()"'],
    ['"unterminated', 14, 'unexpected end of input expecting "\\\\" or "\\""'],
    ['price.nope()', 7, 'unexpected "n" expecting "sum", "avg", "count", "max" or "min"'],
  ]
  for (const [input, column, details] of cases) {
    const e = failure(() => parseSelect(input))
    t.equal(e.code, 'PGRST100', `select=${input}: code`)
    t.equal(e.status, 400)
    t.equal(
      e.message,
      `"failed to parse select parameter (${input})" (line 1, column ${column})`,
      `select=${input}: message`,
    )
    t.match(String(e.details), details, `select=${input}: details`)
  }
})

t.test('filters: every operator', async (t) => {
  const q = (op: string, value: string, quantifier: string | null = null) => ({ kind: 'quant', op, quantifier, value })
  const s = (op: string, value: string) => ({ kind: 'simple', op, value })
  const cases: Array<[string, unknown]> = [
    ['eq.1', { negated: false, operation: q('eq', '1') }],
    ['eq.', { negated: false, operation: q('eq', '') }],
    ['eq.a.b,c)"', { negated: false, operation: q('eq', 'a.b,c)"') }],
    ['neq.x', { negated: false, operation: s('neq', 'x') }],
    ['gt.1', { negated: false, operation: q('gt', '1') }],
    ['gte.1', { negated: false, operation: q('gte', '1') }],
    ['lt.1', { negated: false, operation: q('lt', '1') }],
    ['lte.1', { negated: false, operation: q('lte', '1') }],
    ['like.*Le*', { negated: false, operation: q('like', '*Le*') }],
    ['ilike.*le*', { negated: false, operation: q('ilike', '*le*') }],
    ['match.^A', { negated: false, operation: q('match', '^A') }],
    ['imatch.^a', { negated: false, operation: q('imatch', '^a') }],
    ['eq(any).{1,2}', { negated: false, operation: q('eq', '{1,2}', 'any') }],
    ['like(all).{*a*,*b*}', { negated: false, operation: q('like', '{*a*,*b*}', 'all') }],
    ['not.eq(all).{1}', { negated: true, operation: q('eq', '{1}', 'all') }],
    ['in.(1,2,3)', { negated: false, operation: { kind: 'in', values: ['1', '2', '3'] } }],
    ['in.("a,b","c\\"d",e)', { negated: false, operation: { kind: 'in', values: ['a,b', 'c"d', 'e'] } }],
    ['in.()', { negated: false, operation: { kind: 'in', values: [''] } }],
    ['in.( 1 , 2 )', { negated: false, operation: { kind: 'in', values: ['1 ', ' 2 '] } }],
    ['not.in.(1)', { negated: true, operation: { kind: 'in', values: ['1'] } }],
    ['is.null', { negated: false, operation: { kind: 'is', value: 'null' } }],
    ['is.NULL', { negated: false, operation: { kind: 'is', value: 'null' } }],
    ['is.not_null', { negated: false, operation: { kind: 'is', value: 'not_null' } }],
    ['is.true', { negated: false, operation: { kind: 'is', value: 'true' } }],
    ['is.false', { negated: false, operation: { kind: 'is', value: 'false' } }],
    ['is.unknown', { negated: false, operation: { kind: 'is', value: 'unknown' } }],
    ['not.is.null', { negated: true, operation: { kind: 'is', value: 'null' } }],
    ['is.nullx', { negated: false, operation: { kind: 'is', value: 'null' } }],
    ['in.(1,2)x', { negated: false, operation: { kind: 'in', values: ['1', '2'] } }],
    ['isdistinct.x', { negated: false, operation: { kind: 'isdistinct', value: 'x' } }],
    ['fts.cat', { negated: false, operation: { kind: 'fts', op: 'fts', language: null, value: 'cat' } }],
    [
      'plfts(english).fat cats',
      { negated: false, operation: { kind: 'fts', op: 'plfts', language: 'english', value: 'fat cats' } },
    ],
    ['phfts.a b', { negated: false, operation: { kind: 'fts', op: 'phfts', language: null, value: 'a b' } }],
    [
      'wfts(simple)."a" -b',
      { negated: false, operation: { kind: 'fts', op: 'wfts', language: 'simple', value: '"a" -b' } },
    ],
    ['cs.{a,b}', { negated: false, operation: s('cs', '{a,b}') }],
    ['cd.{a}', { negated: false, operation: s('cd', '{a}') }],
    ['ov.[1,5)', { negated: false, operation: s('ov', '[1,5)') }],
    ['sl.(1,2)', { negated: false, operation: s('sl', '(1,2)') }],
    ['sr.(1,2)', { negated: false, operation: s('sr', '(1,2)') }],
    ['nxr.(1,2)', { negated: false, operation: s('nxr', '(1,2)') }],
    ['nxl.(1,2)', { negated: false, operation: s('nxl', '(1,2)') }],
    ['adj.(1,2)', { negated: false, operation: s('adj', '(1,2)') }],
  ]
  for (const [input, expected] of cases) t.same(parseFilterValue(input, false), expected, input)
})

t.test('filters: invalid', async (t) => {
  const cases: Array<[string, number, string]> = [
    ['noop.0', 1, 'unexpected "o" expecting "not" or operator (eq, gt, ...)'],
    ['val', 1, 'unexpected "v" expecting "not" or operator (eq, gt, ...)'],
    ['', 1, 'unexpected end of input expecting "not" or operator (eq, gt, ...)'],
    ['not.noop.1', 5, 'unexpected "n" expecting operator (eq, gt, ...)'],
    ['eq', 3, 'unexpected end of input expecting operator (eq, gt, ...)'],
    ['eq1', 3, 'unexpected "1" expecting operator (eq, gt, ...)'],
    ['is.maybe', 4, 'expecting isVal: (null, not_null, true, false, unknown)'],
    ['is.nil', 5, 'unexpected "i" expecting isVal: (null, not_null, true, false, unknown)'],
    ['eq().value', 4, 'unexpected ")" expecting operator (eq, gt, ...)'],
    ['in().value', 3, 'unexpected "(" expecting operator (eq, gt, ...)'],
    ['in.1,2', 4, 'unexpected "1" expecting "("'],
    ['in.(1,2', 8, 'unexpected end of input expecting "," or ")"'],
    ['eq(some).1', 4, 'unexpected "s" expecting operator (eq, gt, ...)'],
    ['fts().x', 5, 'unexpected ")" expecting operator (eq, gt, ...)'],
  ]
  for (const [input, column, details] of cases) {
    const e = failure(() => parseFilterValue(input, false))
    t.equal(e.code, 'PGRST100', input)
    t.equal(e.message, `"failed to parse filter (${input})" (line 1, column ${column})`, `${input}: message`)
    t.match(String(e.details), details, `${input}: details`)
  }
  t.equal(parseFilterValue('val', true), null, 'on an RPC read, a non-operator value is an argument')
})

t.test('logic trees', async (t) => {
  const eq = (name: string, value: string, negated = false) => ({
    kind: 'expr',
    filter: { field: f(name), opExpr: { negated, operation: { kind: 'quant', op: 'eq', quantifier: null, value } } },
  })
  t.same(parseLogicTree('or', '(a.eq.1,b.eq.2)'), {
    kind: 'logic',
    op: 'or',
    negated: false,
    children: [eq('a', '1'), eq('b', '2')],
  })
  t.same(parseLogicTree('not.and', '(a.eq.1, b.eq.2)'), {
    kind: 'logic',
    op: 'and',
    negated: true,
    children: [eq('a', '1'), eq('b', '2')],
  })
  t.same(parseLogicTree('or', '(a.eq.1,not.and(b.eq.2,c.not.eq.3))'), {
    kind: 'logic',
    op: 'or',
    negated: false,
    children: [eq('a', '1'), { kind: 'logic', op: 'and', negated: true, children: [eq('b', '2'), eq('c', '3', true)] }],
  })
  t.same(parseLogicTree('or', '(name.eq."a,b",tags.cs.{x,y},id.in.(1,2))'), {
    kind: 'logic',
    op: 'or',
    negated: false,
    children: [
      eq('name', 'a,b'),
      {
        kind: 'expr',
        filter: {
          field: f('tags'),
          opExpr: { negated: false, operation: { kind: 'simple', op: 'cs', value: '{x,y}' } },
        },
      },
      {
        kind: 'expr',
        filter: { field: f('id'), opExpr: { negated: false, operation: { kind: 'in', values: ['1', '2'] } } },
      },
    ],
  })
  t.same(
    parseLogicTree('and', '(a.eq.1,b.eq.2))'),
    parseLogicTree('and', '(a.eq.1,b.eq.2)'),
    'what follows the closing parenthesis is ignored',
  )
  t.same(parseLogicTree('or', '(data->>a.eq.1)'), {
    kind: 'logic',
    op: 'or',
    negated: false,
    children: [
      {
        kind: 'expr',
        filter: {
          field: f('data', [key('a', '->>')]),
          opExpr: { negated: false, operation: { kind: 'quant', op: 'eq', quantifier: null, value: '1' } },
        },
      },
    ],
  })
  const bad: Array<[string, string, string]> = [
    [
      'or',
      '()',
      'unexpected ")" expecting field name (* or [a..z0..9_$]), negation operator (not) or logic operator (and, or)',
    ],
    ['or', '(id.in.1,2,id.eq.3)', 'unexpected "1" expecting "("'],
    ['or', '(a.eq.1', 'unexpected end of input'],
    ['or', '(id.eq.1,not.xor(id.eq.2,id.eq.3))', 'unexpected "x" expecting logic operator (and, or)'],
    ['and', '(ord(id.eq.1,id.eq.1),id.eq.2)', 'unexpected "d" expecting "("'],
  ]
  for (const [op, value, details] of bad) {
    const e = failure(() => parseLogicTree(op, value))
    t.equal(e.code, 'PGRST100', value)
    t.match(e.message, `"failed to parse logic tree (${value})"`, `${value}: message`)
    t.match(String(e.details), details, `${value}: details`)
  }
})

t.test('order', async (t) => {
  t.same(parseOrder('name.desc.nullsfirst'), [{ kind: 'field', field: f('name'), direction: 'desc', nulls: 'first' }])
  t.same(parseOrder('a,b.asc,c.nullslast'), [
    { kind: 'field', field: f('a'), direction: null, nulls: null },
    { kind: 'field', field: f('b'), direction: 'asc', nulls: null },
    { kind: 'field', field: f('c'), direction: null, nulls: 'last' },
  ])
  t.same(parseOrder('json_col->key.asc.nullslast'), [
    { kind: 'field', field: f('json_col', [key('key')]), direction: 'asc', nulls: 'last' },
  ])
  t.same(parseOrder('clients(json_col->key).desc.nullsfirst'), [
    { kind: 'related', relation: 'clients', field: f('json_col', [key('key')]), direction: 'desc', nulls: 'first' },
  ])
  t.same(parseOrder('name,clients(name),id'), [
    { kind: 'field', field: f('name'), direction: null, nulls: null },
    { kind: 'related', relation: 'clients', field: f('name'), direction: null, nulls: null },
    { kind: 'field', field: f('id'), direction: null, nulls: null },
  ])
  const bad: Array<[string, number, string]> = [
    ['id.ac', 4, 'unexpected "c" expecting "asc", "desc", "nullsfirst" or "nullslast"'],
    ['id.descc', 8, 'unexpected \'c\' expecting delimiter (.), "," or end of input'],
    ['id.nullslasttt', 13, 'unexpected \'t\' expecting "," or end of input'],
    ['id.nulsfist', 4, 'expecting "asc", "desc", "nullsfirst" or "nullslast"'],
    ['id.asc.nlsfst', 8, 'expecting "nullsfirst" or "nullslast"'],
    ['id.asc.nullslast.x', 17, 'unexpected \'.\' expecting "," or end of input'],
    [
      'clients(name,id)',
      8,
      'unexpected \'(\' expecting letter, digit, "-", "->>", "->", delimiter (.), "," or end of input',
    ],
  ]
  for (const [input, column, details] of bad) {
    const e = failure(() => parseOrder(input))
    t.equal(e.code, 'PGRST100', input)
    t.equal(e.message, `"failed to parse order (${input})" (line 1, column ${column})`, `${input}: message`)
    t.match(String(e.details), details, `${input}: details`)
  }
})

t.test('columns and on_conflict', async (t) => {
  t.same(parseColumns('columns parameter', 'a, b,"c d"'), ['a', 'b', 'c d'])
  t.equal(failure(() => parseColumns('columns parameter', 'a,(b)')).code, 'PGRST100')
})

t.test('query string: decoding, classification, canonical form', async (t) => {
  const q = parseQueryParams(
    'select=id,name&name=eq.a+b&id=gt.1&b.limit=2&b.offset=1&limit=5&offset=-3&order=id.desc&b.order=x&or=(id.eq.1,id.eq.2)&b.not.and=(x.eq.1)&flag&junk.limit=abc',
  )
  t.same(q.select, [field('id'), field('name')])
  t.same(
    q.filters.map((x) => [x.path, x.filter.field.name, (x.filter.opExpr.operation as { value: string }).value]),
    [
      [[], 'name', 'a b'],
      [[], 'id', '1'],
    ],
  )
  t.same(q.ranges, [
    { path: ['b'], limit: 2, offset: 1 },
    { path: [], limit: 5, offset: null },
    { path: ['junk'], limit: null, offset: null },
  ])
  t.same(
    q.order.map((o) => o.path),
    [[], ['b']],
  )
  t.same(
    q.logic.map((l) => [l.path, l.tree.kind === 'logic' && l.tree.negated]),
    [
      [[], false],
      [['b'], true],
    ],
  )
  t.equal(
    q.canonical,
    'b.limit=2&b.not.and=%28x.eq.1%29&b.offset=1&b.order=x&flag=&id=gt.1&junk.limit=abc&limit=5&name=eq.a%20b&offset=-3&or=%28id.eq.1%2Cid.eq.2%29&order=id.desc&select=id%2Cname',
  )
  t.same(parseQueryParams('').select, [field('*')], 'no select means *')
  t.same(
    parseQueryParams('a=eq.%2B1&%22a.b%22=eq.x').filters.map((x) => [
      x.filter.field.name,
      (x.filter.opExpr.operation as { value: string }).value,
    ]),
    [
      ['a', '+1'],
      ['a.b', 'x'],
    ],
  )
  t.same(
    parseQueryParams('a=eq.%zz').filters.map((x) => (x.filter.opExpr.operation as { value: string }).value),
    ['%zz'],
    'an invalid escape is kept',
  )
  t.same(parseQueryParams('data->>x=eq.1').filters[0].filter.field, f('data', [key('x', '->>')]))
  t.same(
    parseQueryParams('id=eq.1;name=eq.x').filters.map((x) => x.filter.field.name),
    ['id', 'name'],
    '`;` separates parameters too (http-types)',
  )
  t.equal(
    parseQueryParams('select=b&&limit=2&').canonical,
    '=&limit=2&select=b',
    'an inner empty piece is an empty key; a trailing one is dropped',
  )
  t.same(
    ['limit= 7 ', 'limit=(3)', 'limit=0x10', 'limit=%2B5', 'limit=5x', 'limit=1e3'].map(
      (q) => parseQueryParams(q).ranges[0].limit,
    ),
    [7, 3, 16, null, null, null],
    'limit read as Haskell reads an Integer',
  )
  const neg = failure(() => parseQueryParams('limit=-1'))
  t.same([neg.code, neg.status, neg.details], ['PGRST103', 416, 'Limit should be greater than or equal to zero.'])
  const rpc = parseQueryParams('a=1&b=eq.2', { rpcRead: true })
  t.same(rpc.rpcArgs, [['a', '1']])
  t.equal(rpc.filters.length, 1)
})

t.test('nesting deeper than the call stack allows: PGRST100, not a crash', async (t) => {
  const n = 5000
  for (const q of [`or=(${'or('.repeat(n)}a.eq.1${')'.repeat(n)})`, `select=${'a('.repeat(n)}b${')'.repeat(n)}`]) {
    const e = failure(() => parseQueryParams(q))
    t.same([e.code, e.status, e.details], ['PGRST100', 400, 'the value nests too deeply'])
  }
})
