// Package merge is the merge function: on a wake-up for a table it runs
// pipeline.MergeWakeUp, which takes the table's Firestore lease, merges
// staged batches until none is pending or the time budget is spent,
// re-wakes the table when work remains, and asks for the wake-up again when
// a holder that stopped renewing keeps the table.
package merge
