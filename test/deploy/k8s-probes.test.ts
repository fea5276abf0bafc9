// The Kubernetes manifests' probes (deploy/k8s/*.yaml) against the parts they probe: every
// Gatehouse container's readiness probe asks its admin port for /readyz leaving out Redis and
// Postgres (dependencies every replica shares: an outage of either must not take every pod out
// of its Service at once, deploy/README.md "Kubernetes"), and liveness asks /healthz. Each part
// is then started from the manifests' own config file with Redis and Postgres unreachable: the
// manifest's readiness path answers 200 (the pod stays in the Service) where the full /readyz
// answers 503 naming both.
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseAllDocuments } from 'yaml'
import { loadConfig } from '../../src/config/index.js'
import { createStoreAndCache, startPart, type PartName } from '../../src/serve.js'
import { closedPort } from '../helpers/ports.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const k8s = path.join(root, 'deploy', 'k8s')

interface Probe {
  httpGet?: { path?: string; port?: string | number }
}
interface Container {
  name: string
  args?: string[]
  readinessProbe?: Probe
  livenessProbe?: Probe
}

/** Every container of the manifests' Deployments that runs `serve <part>`, with its part. */
function servingContainers(): Array<{ file: string; part: PartName; container: Container }> {
  const out: Array<{ file: string; part: PartName; container: Container }> = []
  for (const file of readdirSync(k8s).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(path.join(k8s, file), 'utf8'))) {
      const d = doc.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: Container[] } } } }
      if (d?.kind !== 'Deployment') continue
      for (const c of d.spec?.template?.spec?.containers ?? []) {
        if (c.args?.[0] === 'serve') out.push({ file, part: c.args[1] as PartName, container: c })
      }
    }
  }
  return out
}

const containers = servingContainers()

t.test('every part has a Deployment whose probes are on its admin port', async (t) => {
  t.same(containers.map((c) => c.part).sort(), ['auth', 'gateway', 'panel', 'rest'])
  for (const { file, container } of containers) {
    const ready = container.readinessProbe?.httpGet
    const live = container.livenessProbe?.httpGet
    t.equal(ready?.port, 'admin', `${file}: readiness on the admin port`)
    t.equal(live?.port, 'admin', `${file}: liveness on the admin port`)
    t.equal(live?.path, '/healthz', `${file}: liveness is /healthz`)
    const url = new URL(ready?.path ?? '', 'http://pod')
    t.equal(url.pathname, '/readyz', `${file}: readiness is /readyz`)
    t.same(url.searchParams.getAll('exclude').sort(), ['postgres', 'redis'], `${file}: leaves Redis and Postgres out`)
  }
})

t.test('with Redis and Postgres down, the probe keeps each part ready; the full /readyz does not', async (t) => {
  const env = {
    GATEHOUSE_REDIS_URL: `redis://127.0.0.1:${await closedPort()}`,
    GATEHOUSE_POSTGRES_URL: `postgres://gatehouse:unused@127.0.0.1:${await closedPort()}/postgres`,
  }
  const listen = () => ({ host: '127.0.0.1', port: 0, admin_host: '127.0.0.1', admin_port: 0 })
  const config = loadConfig({
    file: path.join(k8s, 'config', 'gatehouse.yaml'),
    env,
    overrides: {
      log: { level: 'silent' },
      redis: { key_prefix: 'k8s-probes-test:' },
      gateway: listen(),
      rest: listen(),
      auth: listen(),
      panel: listen(),
    },
  })
  t.equal(config.tenants.source, 'redis', "the manifests' config keeps tenants in Redis")
  const deps = createStoreAndCache(config)
  t.teardown(async () => {
    deps.tenants.close()
    await deps.store.close()
  })
  for (const { file, part, container } of containers) {
    const running = await startPart(part, { config, ...deps })
    t.teardown(() => running.app.close())
    const full = await fetch(`${running.adminUrl}/readyz`)
    const body = (await full.json()) as { failing: string[] }
    t.equal(full.status, 503, `${part}: /readyz is 503 while Redis and Postgres are down`)
    t.same(body.failing.sort(), ['postgres', 'redis'], `${part}: naming both`)
    const probe = await fetch(`${running.adminUrl}${container.readinessProbe?.httpGet?.path}`)
    t.equal(probe.status, 200, `${file}: the readiness probe keeps the ${part} in its Service: ${await probe.text()}`)
  }
})

t.test('a rolling update drops nothing: surge before unavailability, preStop, grace, a budget', async (t) => {
  const shared = loadConfig({
    file: path.join(k8s, 'config', 'gatehouse.yaml'),
    env: { GATEHOUSE_REDIS_URL: 'redis://redis.invalid:6379' },
  })
  // The drain: preStop sleep, then SIGTERM (readyz 503 at once, responses close their
  // connections), in-flight requests for gateway.shutdown_grace_ms, 2 s for the close hooks.
  const HOOKS_S = 2
  for (const file of readdirSync(k8s).filter((f) => f.endsWith('.yaml'))) {
    const docs = parseAllDocuments(readFileSync(path.join(k8s, file), 'utf8')).map((d) => d.toJS() as any)
    for (const d of docs.filter((x) => x?.kind === 'Deployment')) {
      const name = d.metadata.name as string
      const c = (d.spec.template.spec.containers as Array<any>).find((x) => x.args?.[0] === 'serve')
      if (c === undefined) continue
      t.equal(d.spec.strategy?.rollingUpdate?.maxUnavailable, 0, `${name}: a new pod is ready before an old one goes`)
      const sleep = c.lifecycle?.preStop?.exec?.command
      t.equal(sleep?.[0], 'sleep', `${name}: preStop waits for the endpoint removal to spread`)
      const drainS = Number(sleep?.[1] ?? NaN) + shared.gateway.shutdown_grace_ms / 1000 + HOOKS_S
      t.ok(
        d.spec.template.spec.terminationGracePeriodSeconds > drainS,
        `${name}: terminationGracePeriodSeconds ${d.spec.template.spec.terminationGracePeriodSeconds} > drain ${drainS} s`,
      )
      const labels = d.spec.selector.matchLabels as Record<string, string>
      const pdb = docs.find(
        (x) =>
          x?.kind === 'PodDisruptionBudget' &&
          Object.entries(labels).every(([k, v]) => x.spec?.selector?.matchLabels?.[k] === v),
      )
      t.ok(pdb !== undefined, `${name}: a PodDisruptionBudget selects its pods`)
      t.ok(
        pdb?.spec?.maxUnavailable === 1 || pdb?.spec?.minAvailable !== undefined,
        `${name}: the budget bounds evictions`,
      )
    }
  }
})
