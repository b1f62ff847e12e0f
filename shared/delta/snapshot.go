package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Snapshot is the immutable state of a table at one version. It is safe
// for concurrent use.
type Snapshot struct {
	table             *Table
	version           int64
	checkpointVersion int64
	timestampMs       int64
	st                *state
	schema            value.StructType
	// commit is the version's commit file as the snapshot's reader
	// listed it (its Name is empty when unknown), for SnapshotSince.
	commit objstore.Info

	filesOnce sync.Once
	files     []Add
}

func newSnapshot(t *Table, version, cpVersion, tsMs int64, st *state) (*Snapshot, error) {
	schema, err := value.ParseSchema(st.metadata.SchemaString)
	if err != nil {
		return nil, fmt.Errorf("%w: %s version %d: %w", ErrCorruptLog, t.store.URL(), version, err)
	}
	return &Snapshot{table: t, version: version, checkpointVersion: cpVersion, timestampMs: tsMs, st: st, schema: schema}, nil
}

// Snapshot loads the latest version. It returns an error wrapping
// ErrNotATable when the store holds no Delta log.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	seg, err := t.loadSegment(ctx, -1)
	if err != nil {
		return nil, err
	}
	return t.replay(ctx, seg)
}

// SnapshotAt loads version. It returns an error wrapping ErrVersionNotFound
// when the version does not exist or its log was cleaned up.
func (t *Table) SnapshotAt(ctx context.Context, version int64) (*Snapshot, error) {
	if version < 0 {
		return nil, fmt.Errorf("snapshot of %s at version %d: %w", t.store.URL(), version, ErrVersionNotFound)
	}
	seg, err := t.loadSegment(ctx, version)
	if err != nil {
		return nil, err
	}
	return t.replay(ctx, seg)
}

// SnapshotAsOf loads the latest version whose commit timestamp is ≤ ts
// (Delta's timestampAsOf). Commit timestamps are inCommitTimestamp, else
// commitInfo.timestamp, else the commit file's modification time, made
// strictly increasing across versions. A ts after the latest commit gives
// the latest version; a ts before the earliest retained commit is an
// error wrapping ErrVersionNotFound.
func (t *Table) SnapshotAsOf(ctx context.Context, ts time.Time) (*Snapshot, error) {
	commits, err := t.commitTimeline(ctx)
	if err != nil {
		return nil, err
	}
	target := ts.UnixMilli()
	i := sort.Search(len(commits), func(i int) bool { return commits[i].timestampMs > target })
	if i == 0 {
		return nil, fmt.Errorf("snapshot of %s as of %s: %w: earliest retained commit %d is at %s", t.store.URL(),
			ts.UTC().Format(time.RFC3339Nano), ErrVersionNotFound, commits[0].version, msTime(commits[0].timestampMs).Format(time.RFC3339Nano))
	}
	return t.SnapshotAt(ctx, commits[i-1].version)
}

// Version is the snapshot's table version.
func (s *Snapshot) Version() int64 { return s.version }

// Table returns the table the snapshot belongs to.
func (s *Snapshot) Table() *Table { return s.table }

// Store returns the table's store.
func (s *Snapshot) Store() objstore.Store { return s.table.store }

// Protocol returns the protocol in effect.
func (s *Snapshot) Protocol() Protocol { return *s.st.protocol }

// Metadata returns the metaData in effect.
func (s *Snapshot) Metadata() Metadata { return *s.st.metadata }

// Schema returns the parsed table schema.
func (s *Snapshot) Schema() value.StructType { return s.schema }

// PartitionColumns returns the partition columns, in order.
func (s *Snapshot) PartitionColumns() []string { return slices.Clone(s.st.metadata.PartitionColumns) }

// Configuration returns the table properties.
func (s *Snapshot) Configuration() map[string]string { return maps.Clone(s.st.metadata.Configuration) }

// Files returns the live add actions sorted by path (then deletion vector
// id). The slice is shared: callers must not modify it.
func (s *Snapshot) Files() []Add {
	s.filesOnce.Do(func() {
		// Sorting the keys moves 16-byte strings instead of whole Adds; a
		// key is the path, then NUL and the DV id, so key order is
		// (path, DV id) order.
		keys := make([]string, 0, len(s.st.files))
		for k := range s.st.files {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		s.files = make([]Add, len(keys))
		for i, k := range keys {
			s.files[i] = s.st.files[k]
		}
	})
	return s.files
}

// NumFiles returns the number of live files.
func (s *Snapshot) NumFiles() int { return len(s.st.files) }

// Tombstones returns the remove actions still in the log state (not yet
// dropped by a checkpoint), sorted by path.
func (s *Snapshot) Tombstones() []Remove {
	out := slices.Collect(maps.Values(s.st.tombstones))
	slices.SortFunc(out, func(a, b Remove) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(dvID(a.DeletionVector), dvID(b.DeletionVector))
	})
	return out
}

// TxnVersion returns the latest txn version recorded for appID.
// A txn is forgotten once delta.setTransactionRetentionDuration has passed
// since its lastUpdated (Spark's rule); the property is unset by default.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	t, ok := s.st.txns[appID]
	if !ok || s.txnExpired(t) {
		return 0, false
	}
	return t.Version, true
}

// Txns returns the latest unexpired txn action per application id.
func (s *Snapshot) Txns() map[string]Txn {
	out := make(map[string]Txn, len(s.st.txns))
	for k, t := range s.st.txns {
		if !s.txnExpired(t) {
			out[k] = t
		}
	}
	return out
}

// txnExpired applies delta.setTransactionRetentionDuration; txns without
// lastUpdated never expire, and an unparsable property expires nothing.
func (s *Snapshot) txnExpired(t Txn) bool {
	v, ok := s.st.metadata.Configuration[PropSetTransactionRetention]
	if !ok || t.LastUpdated == nil {
		return false
	}
	d, err := ParseInterval(v)
	if err != nil {
		return false
	}
	return *t.LastUpdated < s.table.now().Add(-d).UnixMilli()
}

// DomainMetadata returns the live (not removed) domain metadata by domain.
func (s *Snapshot) DomainMetadata() map[string]DomainMetadata { return maps.Clone(s.st.domains) }

// NumRecords sums stats.numRecords over the live files, minus deletion
// vector cardinalities; ok is false when any file lacks the statistic.
func (s *Snapshot) NumRecords() (int64, bool) {
	var total int64
	for _, a := range s.st.files {
		n, ok := statsNumRecords(a.Stats)
		if !ok {
			return 0, false
		}
		total += n
		if a.DeletionVector != nil {
			total -= a.DeletionVector.Cardinality
		}
	}
	return total, true
}

// statsNumRecords extracts numRecords from a stats JSON string without
// decoding the min/max maps.
func statsNumRecords(stats string) (int64, bool) {
	if stats == "" {
		return 0, false
	}
	var st struct {
		NumRecords *int64 `json:"numRecords"`
	}
	if err := json.Unmarshal([]byte(stats), &st); err != nil || st.NumRecords == nil {
		return 0, false
	}
	return *st.NumRecords, true
}

// SizeBytes sums the sizes of the live files.
func (s *Snapshot) SizeBytes() int64 {
	var total int64
	for _, a := range s.st.files {
		total += a.Size
	}
	return total
}

// CheckpointVersion is the version of the checkpoint the snapshot was
// loaded from, or -1 when it was replayed from JSON commits only.
func (s *Snapshot) CheckpointVersion() int64 { return s.checkpointVersion }

// Timestamp is the commit timestamp of the snapshot's version (see
// SnapshotAsOf; not made monotonic against earlier versions).
func (s *Snapshot) Timestamp() time.Time { return msTime(s.timestampMs) }

// commitTime is a version and its monotonic commit timestamp.
type commitTime struct {
	version     int64
	timestampMs int64
	data        *commitData
}

// commitTimeline reads every retained commit in version order with its
// monotonic timestamp. Commits before a gap (only possible when the log was
// cleaned up without a covering checkpoint) are dropped.
func (t *Table) commitTimeline(ctx context.Context) ([]commitTime, error) {
	l, err := listLog(ctx, t.store, 0)
	if err != nil {
		return nil, err
	}
	if len(l.commits) == 0 {
		return nil, fmt.Errorf("read history of %s: %w", t.store.URL(), ErrNotATable)
	}
	versions := slices.Sorted(maps.Keys(l.commits))
	// Keep only the contiguous run ending at the latest commit.
	first := len(versions) - 1
	for first > 0 && versions[first-1] == versions[first]-1 {
		first--
	}
	versions = versions[first:]
	out := make([]commitTime, len(versions))
	err = parallel(ctx, len(versions), func(ctx context.Context, i int) error {
		c, err := readCommit(ctx, t.store, l.commits[versions[i]], versions[i])
		if err != nil {
			return err
		}
		out[i] = commitTime{version: versions[i], timestampMs: c.timestampMs(), data: c}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read history of %s: %w", t.store.URL(), err)
	}
	ts := make([]int64, len(out))
	for i := range out {
		ts[i] = out[i].timestampMs
	}
	monotonic(ts)
	for i := range out {
		out[i].timestampMs = ts[i]
	}
	return out, nil
}
