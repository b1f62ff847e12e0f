// Package delta reads and writes Delta Lake tables on an objstore.Store:
// log replay (JSON commits, classic, multi-part and V2 checkpoints with
// sidecars, _last_checkpoint), snapshots at the latest version, a version or a
// timestamp, or brought up to date from an earlier one with the commits
// since (SnapshotSince, Snapshots), optimistic commits with Delta's conflict rules, checkpoints,
// history, vacuum and expired-log cleanup, compaction (OPTIMIZE, clustered
// by a k-way merge of sorted files), and Parquet data files with
// statistics, deletion vectors and column mapping on read.
//
// The data files' Parquet as bytes (hardened opening, prefetching, bloom
// filters, page indexes, wide decimals, the Parquet schema of value types,
// the shredding of values into its leaves, the streaming Writer, the
// RowWriter that converts, batches and writes rows and copies row groups
// with a drop mask, a file's schema tree, the conversion of stored values
// to package value's, and the reader: record assembly, row group skipping
// by bounds and bloom filters, sparse reads through the page index) is
// package parquetfile's: delta reads and writes through it, and
// parquetfile never imports delta.
// Delta keeps what a table makes of a file: FileWriter's options,
// partition values, their checks and directories, file names, column
// mapping (names and field ids it hands parquetfile), deletion vectors (it
// loads the bitmap a read skips), statistics (each row handed back as
// written, summaries of copied row groups, bounds in Delta's order) and
// the add action. ReadFile resolves an add into a parquetfile.ReadSpec.
//
// Protocol logic (replay, conflict checks, stats) works on values; the
// object-store calls stay at the edges.
package delta
