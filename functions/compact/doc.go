// Package compact is the scheduled maintenance function: it runs
// pipeline.MaintainAll, which maintains every table (compaction,
// checkpoints, vacuum, log cleanup, tombstone and staging expiry) without
// taking its lease, so merges go on meanwhile; re-wakes tables that have
// pending files or an open batch (a safety net for lost wake-ups); and
// expires old registry records.
//
// Compaction is only one of the jobs it does. The package keeps the name of
// the deployed function (the "Compact" entry point, its terraform resources
// and its scheduler job), which is part of the deployment; the Go side says
// what it runs: maintenance.
package compact
