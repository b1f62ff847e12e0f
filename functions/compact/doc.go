// Package compact is the scheduled function. Each tick runs, unless its
// message names only some of them ({"tasks":["reconcile"]}):
//
//   - the reconcile (gcp.Services.Reconcile, pipeline.Reconcile), which
//     lists the source bucket from per-folder watermarks and hands every
//     file no notification announced to onfile, so that no file is left
//     behind by a lost notification or a first deploy onto a running
//     stream;
//   - pipeline.MaintainAll, which maintains every table (compaction,
//     checkpoints, vacuum, log cleanup, tombstone and staging expiry)
//     without taking its lease, so merges go on meanwhile; re-wakes tables
//     that have pending files or an open batch (a safety net for lost
//     wake-ups); and expires old registry records.
//
// Compaction is only one of the jobs it does. The package keeps the name of
// the deployed function (the "Compact" entry point, its terraform resources
// and its scheduler jobs), which is part of the deployment; the Go side says
// what it runs.
package compact
