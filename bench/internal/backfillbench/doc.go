// Package backfillbench holds what the backfill benchmark shares between
// the driver and the child process that runs dsdelta: the Datastream
// backfill files of one MySQL table with random string keys, the change
// events that follow them (ChangeWriter, for the sustained scenario), and
// the child's measured end-to-end run (stage every file, then merge). It
// does not import DuckDB, so the child links only what dsdelta links.
package backfillbench
