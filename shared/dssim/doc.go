// Package dssim simulates a Datastream stream: it plays random but
// deterministic workloads (backfill, inserts, updates, deletes, primary-key
// changes) against in-memory source tables for MySQL, Oracle and PostgreSQL,
// and renders the changes exactly as Datastream writes them to Cloud Storage
// (JSON lines, gzip JSON lines or Avro object container files, one folder per
// table, time-partitioned, with Datastream's file names), including the
// delivery faults consumers must survive: events duplicated across files,
// re-delivered files and arbitrary delivery order.
//
// Events are dated from a fixed start, so that the same options write the
// same files, or back from a given end (Options.End): a demo passes the
// time now, so that the lag it shows reads true.
//
// Alongside the files it returns the reference state — what the source
// tables hold at the end — so any consumer can be checked row for row.
// The example dataset in the repository, the property tests, the emulator's
// simulator and the benchmarks are all made with it.
package dssim
