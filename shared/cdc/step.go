package cdc

import "github.com/dsdelta/dsdelta/shared/delta"

// Step is one commit set of a merge batch. A batch whose events do not fit
// the merge's memory bound is applied in steps, each a bounded share of
// its staged files, committed to the three tables exactly once:
//
//   - the last step commits txn{AppID(table), Seq}, as a batch applied in
//     one step does, so that "the table holds batch Seq" keeps meaning
//     what the exactly-once contract says (docs/internals.md
//     "Exactly once");
//   - an earlier step k commits txn{ChunkAppID(table), Seq<<ChunkBits | k}
//     instead, a version that grows with every step of every batch.
//
// A step is applied to a table when the table holds its txn, or holds the
// whole batch (a step re-run after its batch completed). Applying batch Seq
// in one step after an earlier attempt applied some of its steps is safe
// for the keyed tables (the ordering rule is idempotent and the history
// keeps a re-delivered event once); the caller keeps a batch's split fixed
// across attempts so that a history-only table never sees an event twice.
type Step struct {
	Seq   int64 // the batch's sequence number
	Chunk int   // the step's index in the batch, from 0
	Last  bool  // the batch's last (or only) step
}

// ChunkBits is the room a batch's step index takes in a step's txn version:
// a batch may have up to 2^20 steps.
const ChunkBits = 20

// ChunkAppID is the txn application id of the steps of a table's batches
// before the last one.
func ChunkAppID(tableID string) string { return AppID(tableID) + "#step" }

func (s Step) version() int64 { return s.Seq<<ChunkBits | int64(s.Chunk) }

// applied reports whether snap already holds the step.
func (s Step) applied(tableID string, snap *delta.Snapshot) bool {
	if v, ok := snap.TxnVersion(AppID(tableID)); ok && v >= s.Seq {
		return true
	}
	if s.Last {
		return false
	}
	v, ok := snap.TxnVersion(ChunkAppID(tableID))
	return ok && v >= s.version()
}

// setTxn stamps a commit with the step's txn.
func (s Step) setTxn(tx *delta.Transaction, tableID string) {
	if s.Last {
		tx.SetTxn(AppID(tableID), s.Seq)
		return
	}
	tx.SetTxn(ChunkAppID(tableID), s.version())
}
