// Command bench measures dsdelta against DuckDB and against itself as
// tables grow: decoding Datastream files, merging a CDC batch into a
// current-state table, how the merge scales with the table, the merge's
// peak memory, a backfill end to end (stage then merge), and an scd2
// merge against the current-mode merge of the same batch. Run it from
// bench/ with `go run ./bench [--quick] [--only backfill,...]`; it writes
// RESULTS.md there and ends with one SUMMARY line.
//
// It is its own module so DuckDB (cgo) never reaches a deployed function.
package main
