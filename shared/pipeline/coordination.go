package pipeline

import (
	"context"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// The use cases ask for coordination one small interface at a time, so that
// a caller provides, and a test fakes, only what the use cases it runs
// need: Stage uses the Registry; MergeTable the Leaser, Batches and
// Registry; Maintain the Status and Registry (it takes no lease: its
// rewrites commit optimistically beside the merges); MergeWakeUp adds the
// Status to MergeTable's, and MaintainAll the Expirer to Maintain's; the
// reconcile, which stages the files whose notification never arrived, keeps
// its progress in the Watermarks. A backend
// (coord.Local, firestorecoord.Coordinator) provides them all, and one
// conformance suite (coordtest) checks every one of them on each backend.
// Package coord describes how they work together: exactly once, the lease,
// no lost wake-ups.

// Leaser is the per-table lease with a fencing token that serialises the
// merges of a table (maintenance takes none, see Pipeline.Maintain).
type Leaser interface {
	// Acquire takes the table's lease for ttl. It returns coord.ErrLeaseHeld
	// when another holder has a live lease; an expired lease is taken over,
	// and so is, by the local backend, the lease of a holder process that
	// is gone from this host (see coord.Process). The same holder acquiring
	// again gets a new token (its old Lease is lost).
	Acquire(ctx context.Context, tableID, holder string, ttl time.Duration) (coord.Lease, error)
	// Renew extends a held lease to now+ttl, or returns coord.ErrLeaseLost.
	Renew(ctx context.Context, l coord.Lease, ttl time.Duration) (coord.Lease, error)
	// Release gives the lease up. It returns coord.ErrLeaseLost, changing
	// nothing, when the lease was taken over meanwhile.
	Release(ctx context.Context, l coord.Lease) error
	// CheckLease returns nil while the lease holds, coord.ErrLeaseLost
	// otherwise.
	CheckLease(ctx context.Context, l coord.Lease) error
}

// Registry is the staged-file registry: one record per source object.
type Registry interface {
	// RegisterFile records a staged file as pending. It is idempotent per
	// file id: a file already known is returned unchanged with created
	// false. A quarantined file (a replay after a fix) or a skipped one
	// (after the configuration includes its table, say) is staged again,
	// with a new arrival number, and created true. The backend sets ID,
	// State, ArrivalSeq, StagedAt and clears BatchSeq, Reason, Record,
	// DoneAt and ExpireAt; it keeps the other fields, SourceCreated
	// included, as the caller passes them.
	RegisterFile(ctx context.Context, f coord.FileRecord) (rec coord.FileRecord, created bool, err error)
	// Quarantine records a permanently bad file with the reason (f.Record
	// says where in the file). A staged or batched file leaves the work
	// queue; a merged file cannot be quarantined (coord.ErrInvalidState);
	// a skipped file is recorded anew, as an unknown one is.
	Quarantine(ctx context.Context, f coord.FileRecord, reason string) (coord.FileRecord, error)
	// Skip records a file that staging read and found nothing to merge in
	// (no events, or its table is excluded by configuration; f.Table may be
	// "_unknown._unknown"), so that the reconcile does not stage it again:
	// State coord.StateSkipped with the reason, done now and expiring after
	// the retention, as a merged file does. A skipped file is never
	// pending, in a batch or counted in a table's status, and a table with
	// only skipped files has none. When the file is already recorded, in
	// any state, Skip returns its record unchanged.
	Skip(ctx context.Context, f coord.FileRecord, reason string) (coord.FileRecord, error)
	// File returns the record of a file id, or coord.ErrNotFound.
	File(ctx context.Context, id string) (coord.FileRecord, error)
	// Files returns the records of the ids that are known, in any state,
	// by id; unknown ids are absent from the map. It takes any number of
	// ids and rejects invalid ones (coord.ValidFileID).
	Files(ctx context.Context, ids []string) (map[string]coord.FileRecord, error)
	// Pending returns staged files not yet in a batch, in arrival order, at
	// most limit (all when limit <= 0).
	Pending(ctx context.Context, tableID string, limit int) ([]coord.FileRecord, error)
	// ListFiles returns a table's files in a state (all states when state
	// is empty), in arrival order.
	ListFiles(ctx context.Context, tableID string, state coord.FileState) ([]coord.FileRecord, error)
}

// Batches forms the merge batches of a table and closes them, fenced by
// the table's lease.
type Batches interface {
	// NextBatch returns the table's open batch unchanged if there is one
	// (Resumed set: an earlier attempt may have left work of its own);
	// otherwise it takes pending files in arrival order, stopping before
	// the file that would pass any of lim's limits (but taking at least one
	// file, so a file larger than a limit cannot block the table), gives
	// them the next sequence number and records the batch. It returns
	// coord.ErrNoWork when nothing is pending and coord.ErrLeaseLost when l
	// does not hold.
	NextBatch(ctx context.Context, l coord.Lease, tableID string, lim coord.BatchLimits) (coord.Batch, error)
	// CompleteBatch marks the batch's files merged (except quarantined
	// ones), closes the batch and updates the table status. Completing a
	// batch that is already done is a no-op. It returns coord.ErrLeaseLost
	// when l does not hold.
	CompleteBatch(ctx context.Context, l coord.Lease, b coord.Batch, stats coord.BatchStats) error
}

// Status reads the coordination view of the tables.
type Status interface {
	// Statuses returns the status of every table with registered files, by
	// table id.
	Statuses(ctx context.Context) ([]coord.TableStatus, error)
	// Status returns one table's status, or coord.ErrNotFound.
	Status(ctx context.Context, tableID string) (coord.TableStatus, error)
}

// Expirer forgets what no longer needs remembering.
type Expirer interface {
	// Expire deletes records of files merged or skipped before the cutoff
	// and done batches completed before it, except each table's latest
	// batch. It returns how many records it deleted.
	Expire(ctx context.Context, before time.Time) (int, error)
}

// Watermarks keeps the reconcile's progress through each source folder, as
// documents opaque to the coordinator. Keys are arbitrary strings (such as
// "gs://bucket/prefix/folder") of at most coord.MaxWatermarkKeyBytes of
// UTF-8, and documents at most coord.MaxWatermarkBytes. Watermarks never
// expire.
type Watermarks interface {
	// Watermark returns the document stored under key and its revision;
	// nil and 0 when there is none.
	Watermark(ctx context.Context, key string) (data []byte, rev int64, err error)
	// PutWatermark stores data under key when the stored revision is still
	// rev (0: none stored) and returns the new revision, one more than
	// rev; coord.ErrConflict when another writer stored first.
	PutWatermark(ctx context.Context, key string, data []byte, rev int64) (int64, error)
	// ListWatermarks calls fn for every stored key starting with prefix,
	// in key order, with its document. An error from fn stops the listing
	// and is returned unchanged.
	ListWatermarks(ctx context.Context, prefix string, fn func(key string, data []byte) error) error
}

// Coordination is the coordination a Pipeline runs over. A use case uses
// only some of it (see above), so a caller that runs only those may leave
// the rest nil.
type Coordination struct {
	Registry   Registry
	Leaser     Leaser
	Batches    Batches
	Status     Status
	Expirer    Expirer
	Watermarks Watermarks
}

// Coordinator is a backend that provides every part of the coordination,
// as coord.Local and firestorecoord.Coordinator do.
type Coordinator interface {
	Leaser
	Registry
	Batches
	Status
	Expirer
	Watermarks
}

// Coordinate returns the Coordination that c provides in full.
func Coordinate(c Coordinator) Coordination {
	return Coordination{Registry: c, Leaser: c, Batches: c, Status: c, Expirer: c, Watermarks: c}
}
