// Package cdc is the apply engine: it turns batches of normalised change
// events into a history table (every event, append-only), a current-state
// table (one row per primary key, the change with the greatest ordering key
// wins) and a tombstone table (deleted keys and the position of their
// delete), all Delta tables, exactly once per batch.
//
// The rule per key (README "What it does"), given the latest event e of a
// batch, the stored row r and the stored tombstone t:
//
//	apply e  iff  (no r or e.order > r.order) and (no t or e.order >= t.order)
//
// The ">=" against tombstones is what makes the three per-table commits of a
// batch independent: after a crash between them, a re-run sees the
// tombstones this very batch recorded and still applies its deletes, while a
// genuinely older event (strictly smaller order) stays ignored. Distinct
// events of one key never share an order (the order includes the change
// type's rank), so ">=" only ever matches a re-delivery of the same delete.
//
// That rule is mode current's. A table's Mode (mode.go, recorded in the
// state table's properties) can keep more: soft_delete (softdelete.go)
// keeps deleted keys, marked. Every mode is merged batch by batch from what
// the tables hold, and replayed from the history by Verify and Rebuild
// (replaymode.go) under the same rule.
//
// # Rows of values
//
// Values pass through the engine as rows of package value's Go values
// ([]any), each boxed once by the decoder, from slabs (value.Boxes), and
// converted once to a Parquet value by the writer. The semantics need
// whole rows where a part or batch of several schemas is conformed row by
// row (Conform, and ConformCast, the schema-overwrite casts), where a
// partitioned table's rows are routed by their values, and in the
// soft-delete and SCD2 modes' comparisons and versions. Elsewhere rows are
// a convenience that costs little: staging's rows given to the writer
// column by column instead, their metadata set from each event's typed
// fields and none boxed, wrote the same bytes in 1–2% more CPU time (eight
// interleaved runs of pipeline's BenchmarkStage), and the state's rows so
// given took an eighth more, as each value is then reached through its
// change once per column instead of once per row. What a value costs is
// parquet-go's encoding, and its typed path (GenericWriter of a Go struct)
// wrote a staged part's columns slower than the parquet.Value one used
// here.
package cdc
