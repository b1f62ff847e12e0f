package delta

import "fmt"

// Kinds of ErrConflict, after Spark's ConflictChecker exceptions. Every one
// satisfies errors.Is(err, ErrConflict).
var (
	// ErrProtocolChanged: a concurrent commit changed the protocol.
	ErrProtocolChanged = fmt.Errorf("%w: protocol changed", ErrConflict)
	// ErrMetadataChanged: a concurrent commit changed the table metadata.
	ErrMetadataChanged = fmt.Errorf("%w: metadata changed", ErrConflict)
	// ErrConcurrentAppend: a concurrent commit added data this transaction
	// should have read.
	ErrConcurrentAppend = fmt.Errorf("%w: concurrent append", ErrConflict)
	// ErrConcurrentDeleteRead: a concurrent commit removed a file this
	// transaction read.
	ErrConcurrentDeleteRead = fmt.Errorf("%w: concurrent delete of a read file", ErrConflict)
	// ErrConcurrentDeleteDelete: a concurrent commit removed a file this
	// transaction removes too.
	ErrConcurrentDeleteDelete = fmt.Errorf("%w: concurrent delete of the same file", ErrConflict)
)

// checkConflicts applies Delta's optimistic concurrency rules to one
// winning commit w that landed after our read version (checklist §11):
//
//   - w changed protocol or metaData → conflict;
//   - w wrote a txn for an appId we set or read (TxnVersion) → conflict;
//   - w removed a file we remove → delete-delete conflict; a file we read
//     (ReadFiles), or any file when we read the whole table → delete-read;
//   - w added data files (dataChange) while we read the whole table →
//     concurrent append, except under WriteSerializable when w was a blind
//     append; when we change the metadata, any data added by w conflicts.
//
// A blind append (reads nothing, removes nothing) therefore never conflicts
// with another blind append: it only retries at the next version.
func (t *Transaction) checkConflicts(w *commitData) error {
	ourRemoves := make(map[string]bool, len(t.removes))
	for _, r := range t.removes {
		ourRemoves[r.Path] = true
	}
	ourApps := make(map[string]bool, len(t.txns))
	for _, x := range t.txns {
		ourApps[x.AppID] = true
	}
	winnerBlind := isBlindAppendCommit(w)
	for i := range w.actions {
		a := &w.actions[i]
		switch {
		case a.Protocol != nil:
			return fmt.Errorf("%w by version %d", ErrProtocolChanged, w.version)
		case a.MetaData != nil:
			return fmt.Errorf("%w by version %d", ErrMetadataChanged, w.version)
		case a.Txn != nil:
			if ourApps[a.Txn.AppID] || t.readApps[a.Txn.AppID] {
				return fmt.Errorf("%w: version %d wrote txn %d for appId %q", ErrConcurrentTxn, w.version, a.Txn.Version, a.Txn.AppID)
			}
		case a.Remove != nil:
			p := a.Remove.Path
			switch {
			case ourRemoves[p]:
				return fmt.Errorf("%w: version %d removed %q", ErrConcurrentDeleteDelete, w.version, p)
			case t.readPaths[p]:
				return fmt.Errorf("%w: version %d removed %q", ErrConcurrentDeleteRead, w.version, p)
			case t.readWhole:
				return fmt.Errorf("%w: version %d removed %q while this transaction read the whole table", ErrConcurrentDeleteRead, w.version, p)
			}
		case a.Add != nil && a.Add.DataChange:
			switch {
			case t.metadata != nil:
				return fmt.Errorf("%w: version %d added %q while this transaction changes the metadata", ErrConcurrentAppend, w.version, a.Add.Path)
			case t.readWhole && (t.isolation == Serializable || !winnerBlind):
				return fmt.Errorf("%w: version %d added %q while this transaction read the whole table (%s)", ErrConcurrentAppend, w.version, a.Add.Path, t.isolation)
			}
		}
	}
	return nil
}

// isBlindAppendCommit reports whether a commit only appended data: its
// commitInfo.isBlindAppend when present, else inferred from its actions.
func isBlindAppendCommit(c *commitData) bool {
	if c.info != nil && c.info.IsBlindAppend != nil {
		return *c.info.IsBlindAppend
	}
	for i := range c.actions {
		a := &c.actions[i]
		if a.Remove != nil || a.MetaData != nil || a.Protocol != nil || (a.Add != nil && !a.Add.DataChange) {
			return false
		}
	}
	return true
}
