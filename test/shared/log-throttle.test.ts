// LogThrottle (src/shared/log-throttle.ts): the first event of a key in a window is logged at its
// level, the rest of the window is not; keys apart; the map bounded. A clock of our own.
import t from 'tap'
import { LogThrottle } from '../../src/shared/index.js'

t.test('once per key and window, keys apart, bounded', async (t) => {
  let now = 1_000_000
  const th = new LogThrottle({ windowMs: 30_000, now: () => now, maxKeys: 2 })
  t.equal(th.first('a'), true, 'the first of an outage')
  t.equal(th.first('a'), false, 'the rest of the window')
  t.equal(th.first('b'), true, 'another key is its own')
  now += 29_999
  t.equal(th.first('a'), false, 'still inside the window')
  now += 1
  t.equal(th.first('a'), true, 'a new window')
  t.equal(th.first('c'), true, 'a third key (maxKeys 2): the oldest, a, goes')
  t.equal(th.first('a'), true, 'a was forgotten, so its next event is logged again')
  t.equal(th.first('c'), false, 'c is remembered')
})
