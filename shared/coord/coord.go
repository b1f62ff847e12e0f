package coord

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrLeaseHeld is returned by Acquire when another holder has a live lease.
	ErrLeaseHeld = errors.New("lease held by another holder")
	// ErrLeaseLost is returned when a lease expired or was taken over.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNoWork is returned by NextBatch when no staged file is pending.
	ErrNoWork = errors.New("no pending files")
	// ErrNotFound is returned when a table, file or batch is unknown.
	ErrNotFound = errors.New("not found")
	// ErrInvalidState is returned for a change the record's state forbids,
	// such as quarantining a file that was already merged.
	ErrInvalidState = errors.New("invalid state change")
	// ErrConflict is returned when a compare-and-swap lost to another
	// writer: by PutWatermark when the stored revision is no longer the one
	// the caller read, and by a backend that gave up retrying under
	// contention.
	ErrConflict = errors.New("concurrent update")
)

// DefaultRetention is how long records of merged files and done batches are
// kept by default: as long as Pub/Sub may re-deliver a notification.
const DefaultRetention = 7 * 24 * time.Hour

// MaxBatchFiles bounds the files of one batch, whatever NextBatch is asked
// for, so that forming or completing a batch fits in one Firestore
// transaction.
const MaxBatchFiles = 400

// FileState is the life-cycle state of a registered file.
type FileState string

// File states. A file goes staged → batched → merged, or to quarantined.
// A file that staging found nothing to merge in is skipped instead: it is
// never pending nor counted, expires like a merged file, and is staged again
// when registered (after the configuration includes its table, say).
const (
	StateStaged      FileState = "staged"      // staged, waiting for a batch
	StateBatched     FileState = "batched"     // in an open batch
	StateMerged      FileState = "merged"      // its batch completed
	StateQuarantined FileState = "quarantined" // permanently bad until replayed
	StateSkipped     FileState = "skipped"     // nothing to merge: no events, or its table is excluded
)

// FileRecord is the registry entry of one source file.
type FileRecord struct {
	ID         string    `firestore:"id" json:"id"`                       // FileID(Bucket, Name, Generation)
	Table      string    `firestore:"table" json:"table"`                 // table id "<db>.<table>"
	Bucket     string    `firestore:"bucket" json:"bucket"`               // source bucket
	Name       string    `firestore:"name" json:"name"`                   // source object name
	Generation int64     `firestore:"generation" json:"generation"`       // source object generation
	Size       int64     `firestore:"size" json:"size"`                   // bytes of the staged file (source bytes when not staged)
	StagedPath string    `firestore:"stagedPath" json:"stagedPath"`       // lake-relative path of the staged parquet file
	Events     int64     `firestore:"events" json:"events"`               // change events in the file
	State      FileState `firestore:"state" json:"state"`                 // set by the coordinator
	Reason     string    `firestore:"reason" json:"reason,omitempty"`     // why the file is quarantined or skipped
	Record     string    `firestore:"record" json:"record,omitempty"`     // where in the file the problem is (record number)
	ArrivalSeq int64     `firestore:"arrivalSeq" json:"arrivalSeq"`       // per-table arrival order, set by the coordinator
	BatchSeq   int64     `firestore:"batchSeq" json:"batchSeq,omitempty"` // the batch that took the file, 0 before
	// SourceBytes is the size of the Datastream source object, which the
	// merge's memory follows more closely than the staged Size.
	SourceBytes int64 `firestore:"sourceBytes" json:"sourceBytes,omitempty"`
	// MinSourceTime and MaxSourceTime bound the source timestamps of the
	// file's events; CompleteBatch advances the table's last applied source
	// time to the largest MaxSourceTime of the batch.
	MinSourceTime time.Time `firestore:"minSourceTime,omitempty" json:"minSourceTime,omitzero"`
	MaxSourceTime time.Time `firestore:"maxSourceTime,omitempty" json:"maxSourceTime,omitzero"`
	// SourceCreated is when the source object was created, zero when
	// unknown; the coordinator keeps what the caller passes.
	SourceCreated time.Time `firestore:"sourceCreated,omitempty" json:"sourceCreated,omitzero"`
	// StagedAt is when the coordinator registered the file.
	StagedAt time.Time `firestore:"stagedAt,omitempty" json:"stagedAt,omitzero"`
	// DoneAt is when the file was merged or skipped; zero before. Expire
	// selects on it.
	DoneAt time.Time `firestore:"doneAt,omitempty" json:"doneAt,omitzero"`
	// ExpireAt is when the record may be deleted (a Firestore TTL policy
	// reads it); zero, and absent from the document, until the file is
	// merged or skipped, so that staged and quarantined records never
	// expire.
	ExpireAt time.Time `firestore:"expireAt,omitempty" json:"expireAt,omitzero"`
}

// FileID is the registry id of a source object: a hash of bucket, name and
// generation, because names contain '/' and can be long.
func FileID(bucket, name string, generation int64) string {
	h := sha256.New()
	h.Write([]byte(bucket))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(generation, 10)))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// MaxWatermarkKeyBytes bounds a watermark key. ListWatermarks orders keys
// by a Firestore query, which considers only the first 1,500 bytes of a
// string (the emulator 1,499), so keys stay below that with a margin; it is
// room enough for gs://<bucket, 222 bytes at most>/<object name prefix,
// 1,024 bytes at most>.
const MaxWatermarkKeyBytes = 1400

// MaxWatermarkBytes bounds a watermark document, well inside Firestore's
// 1 MiB per document.
const MaxWatermarkBytes = 512 << 10

// WatermarkID is the document id of a watermark key: a hash, because keys
// contain '/' and can be long. The key itself is stored in the document.
func WatermarkID(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:16])
}

// Lease is a held table lease.
type Lease struct {
	Table   string
	Holder  string
	Token   int64     // fencing token, strictly increasing per table
	Expires time.Time // the lease is lost after this instant unless renewed
}

// BatchLimits bound the batch NextBatch forms. A limit <= 0 is no limit,
// except that Files is always capped at MaxBatchFiles.
type BatchLimits struct {
	Files       int   // files
	Bytes       int64 // staged bytes (FileRecord.Size)
	Events      int64 // change events (FileRecord.Events)
	SourceBytes int64 // Datastream source bytes (FileRecord.SourceBytes)
}

// Batch is a set of staged files merged together under one sequence number.
type Batch struct {
	Table   string
	Seq     int64        // strictly increasing per table, starting at 1
	Files   []FileRecord // in arrival order, with their current state
	Created time.Time
	// Resumed is true when the batch was opened by an earlier NextBatch
	// and is handed out again (an attempt that did not complete it): only
	// then can work of an earlier attempt, such as a step plan, exist.
	Resumed bool
}

// Bytes returns the total Size of the batch's files.
func (b Batch) Bytes() int64 {
	var n int64
	for _, f := range b.Files {
		n += f.Size
	}
	return n
}

// BatchStats is what a merge reports when it completes a batch.
type BatchStats struct {
	StateVersion   int64     // version of the current-state table after the batch
	HistoryVersion int64     // version of the history table after the batch
	CommittedAt    time.Time // commit time; the coordinator's clock when zero
	Events         int64     // events read
	Inserted       int64     // keys inserted
	Updated        int64     // keys replaced
	Deleted        int64     // keys deleted
	Stale          int64     // events ignored as older than the stored state
}

// TableStatus is the coordination view of one table.
type TableStatus struct {
	Table string
	// LastSourceTime is the largest source timestamp of a merged file: the
	// table is current up to here. Lag is now minus LastSourceTime.
	LastSourceTime time.Time
	LastCommitTime time.Time // when the last batch committed
	Pending        int64     // staged files not yet in a batch
	Quarantined    int64     // files quarantined and not replayed
	StateVersion   int64     // current-state table version after the last batch
	HistoryVersion int64     // history table version after the last batch
	LastBatchSeq   int64     // last batch sequence number handed out
	OpenBatchSeq   int64     // the batch in progress, 0 when none
	LastArrivalSeq int64     // last arrival sequence number handed out
	// Cumulative counters over completed batches.
	Batches  int64
	Files    int64
	Events   int64
	Inserted int64
	Updated  int64
	Deleted  int64
	Stale    int64
	// LeaseHolder and LeaseExpires describe a live lease; empty when free.
	LeaseHolder  string
	LeaseExpires time.Time
	// LeaseProcess is "host/pid" of the live lease's holder when the backend
	// records it (the local backend does); empty otherwise.
	LeaseProcess string
}
