// Connections of the panel: side pools (shared/side-pools.ts) of a few connections per
// (tenant, connection URL), at most PANEL_CONSTANTS.sidePoolsMax such pools by default.
import { PANEL_CONSTANTS } from '../config/index.js'
import { createSidePools, type SidePools } from '../shared/index.js'

export type PanelPools = SidePools

export function createPanelPools(opts: { max?: number; size?: number; applicationName: string }): PanelPools {
  return createSidePools({
    maxPools: opts.max ?? PANEL_CONSTANTS.sidePoolsMax,
    poolSize: opts.size ?? PANEL_CONSTANTS.sidePoolSize,
    timeoutMs: PANEL_CONSTANTS.sidePoolTimeoutMs,
    applicationName: opts.applicationName,
  })
}
