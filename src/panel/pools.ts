// Connections of the panel: side pools (shared/side-pools.ts) of a few connections per
// (tenant, connection URL), at most 50 such pools by default.
import { createSidePools, type SidePools } from '../shared/index.js'

export type PanelPools = SidePools

export function createPanelPools (opts: { max?: number, size?: number, applicationName: string }): PanelPools {
  return createSidePools({
    maxPools: opts.max ?? 50,
    poolSize: opts.size ?? 2,
    timeoutMs: 5_000,
    applicationName: opts.applicationName
  })
}
