// Package dsdelta registers dsdelta's three Cloud Functions (gen2) entry
// points for source deploys: OnFile (object finalized), Merge (wake-up)
// and Compact (scheduled maintenance: compaction, checkpoints, vacuum,
// expiry and the wake-up safety net, all of pipeline.MaintainAll; the
// deployed name stays "Compact"). Each is a thin adapter over
// shared/pipeline.
package dsdelta
