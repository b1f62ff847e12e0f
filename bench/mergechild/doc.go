// Command mergechild runs one measured piece of dsdelta work for the bench
// driver — the benchmark batch applied to one benchmark table, or with
// -backfill the embedded pipeline over the backfill files — and prints the
// time and its own peak RSS as JSON. The bench driver builds and runs it so
// the memory figure is dsdelta's: this binary links what dsdelta links, not
// DuckDB.
package main
