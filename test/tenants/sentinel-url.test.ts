// The Redis URL forms the tenant store accepts: plain redis:// and Redis Sentinel
// (redis+sentinel://[:password@]h1:port,h2:port/<master>), as deploy/k8s configures it.
import t from 'tap'
import { connectRedis } from '../../src/tenants/index.js'
import { redisUrl } from '../helpers/redis.js'

t.test('a sentinel URL becomes a sentinel client for the named master', async (t) => {
  const c = connectRedis('redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2/mymaster', { lazyConnect: true })
  t.teardown(() => c.disconnect())
  t.same(c.options.sentinels, [
    { host: '10.0.0.1', port: 26379 },
    { host: '10.0.0.2', port: 26379 },
  ])
  t.equal(c.options.name, 'mymaster')
  t.equal(c.options.password, 's3cret')
  t.equal(c.status, 'wait', 'lazy: nothing dialled')
})

t.test('a plain URL connects to that server', async (t) => {
  const c = connectRedis(redisUrl(), { lazyConnect: true })
  t.teardown(() => c.disconnect())
  t.equal(c.options.sentinels, null)
  t.equal(await c.ping(), 'PONG')
})
