// Connections of the panel: side pools (shared/side-pools.ts) of a few connections per
// (tenant, connection URL), at most PANEL_CONSTANTS.sidePoolsMax such pools.
import { PANEL_CONSTANTS } from '../config/index.js'
import { createSidePools, type SidePools } from '../shared/index.js'

export function createPanelPools(applicationName: string): SidePools {
  return createSidePools({
    maxPools: PANEL_CONSTANTS.sidePoolsMax,
    poolSize: PANEL_CONSTANTS.sidePoolSize,
    timeoutMs: PANEL_CONSTANTS.sidePoolTimeoutMs,
    applicationName,
  })
}
