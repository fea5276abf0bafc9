// Request ids made for requests that come without one: random version 4 UUIDs (RFC 9562
// section 5.4), never repeated, across the batches of random bytes they are cut from.
import t from 'tap'
import { requestUuid } from '../../src/shared/request-uuid.js'

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('version 4 UUIDs, all different, every random digit varying', async (t) => {
  const seen = new Set<string>()
  const digits = Array.from({ length: 36 }, () => new Set<string>())
  for (let i = 0; i < 5000; i++) {
    const id = requestUuid()
    if (!V4.test(id)) t.fail(`not a version 4 UUID: ${id}`)
    seen.add(id)
    for (let c = 0; c < 36; c++) digits[c]!.add(id[c]!)
  }
  t.equal(seen.size, 5000, 'no id repeats (5000 ids: 39 batches of random bytes)')
  for (let c = 0; c < 36; c++) {
    if ([8, 13, 18, 23].includes(c)) t.same([...digits[c]!], ['-'], `position ${c} is a dash`)
    else if (c === 14) t.same([...digits[c]!], ['4'], 'the version digit is 4')
    else if (c === 19) t.same([...digits[c]!].sort(), ['8', '9', 'a', 'b'], 'the variant digit is 8, 9, a or b')
    else if (digits[c]!.size !== 16) t.fail(`position ${c} took ${digits[c]!.size} of 16 digits`)
  }
})
