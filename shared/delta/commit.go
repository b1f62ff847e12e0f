package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Operation names a commit for commitInfo and DESCRIBE HISTORY.
type Operation struct {
	// Name is Spark's operation name: "WRITE", "STREAMING UPDATE", "MERGE",
	// "DELETE", "OPTIMIZE", ...
	Name string
	// Parameters are operationParameters; values are strings (lists and
	// predicates as JSON text), as Spark writes them.
	Parameters map[string]string
}

// IsolationLevel is the isolation a transaction is checked against.
type IsolationLevel string

const (
	// WriteSerializable (the default, as in Spark) ignores files added by
	// concurrent blind appends when checking what this transaction read:
	// the commit order may differ from a serial order only for appends.
	WriteSerializable IsolationLevel = "WriteSerializable"
	// Serializable also fails when a concurrent blind append added files
	// while this transaction read the whole table.
	Serializable IsolationLevel = "Serializable"
)

// Transaction collects the actions of one commit against a read snapshot.
// It is not safe for concurrent use.
type Transaction struct {
	snap      *Snapshot
	op        Operation
	isolation IsolationLevel
	adds      []Add
	removes   []Remove
	txns      []Txn
	metadata  *Metadata
	protocol  *Protocol
	readPaths map[string]bool
	readWhole bool
	readApps  map[string]bool
	metrics   map[string]string
	txnID     string
	committed bool
}

// NewTransaction starts a transaction reading snap.
func (s *Snapshot) NewTransaction(op Operation) *Transaction {
	return &Transaction{
		snap:      s,
		op:        op,
		isolation: WriteSerializable,
		readPaths: map[string]bool{},
		readApps:  map[string]bool{},
		txnID:     uuid.NewString(),
	}
}

// Add adds files to the commit.
func (t *Transaction) Add(adds ...Add) { t.adds = append(t.adds, adds...) }

// Remove removes files in the commit. A removed file counts as read: a
// concurrent removal of the same file is a conflict.
func (t *Transaction) Remove(removes ...Remove) { t.removes = append(t.removes, removes...) }

// SetTxn records the application transaction version for appID.
func (t *Transaction) SetTxn(appID string, version int64) {
	now := t.snap.table.now().UnixMilli()
	t.txns = append(t.txns, Txn{AppID: appID, Version: version, LastUpdated: &now})
}

// TxnVersion reads appID's txn version from the read snapshot and records
// the read: a concurrent commit of a txn for appID then conflicts.
func (t *Transaction) TxnVersion(appID string) (int64, bool) {
	t.readApps[appID] = true
	return t.snap.TxnVersion(appID)
}

// SetMetadata replaces the table metadata (schema, properties,
// partitioning) in this commit. Nil maps and lists are written as empty
// ones and an empty format provider as "parquet", as the protocol requires.
func (t *Transaction) SetMetadata(md Metadata) {
	if md.Format.Provider == "" {
		md.Format.Provider = "parquet"
	}
	if md.Format.Options == nil {
		md.Format.Options = map[string]string{}
	}
	if md.Configuration == nil {
		md.Configuration = map[string]string{}
	}
	if md.PartitionColumns == nil {
		md.PartitionColumns = []string{}
	}
	t.metadata = &md
}

// SetProtocol upgrades the protocol in this commit.
func (t *Transaction) SetProtocol(p Protocol) { t.protocol = &p }

// ReadFiles records that the transaction's result depends on these files
// (add paths as in the log): a concurrent removal of any of them conflicts.
func (t *Transaction) ReadFiles(paths ...string) {
	for _, p := range paths {
		t.readPaths[p] = true
	}
}

// ReadWholeTable records that the transaction's result depends on the
// whole table: any concurrent removal, and any concurrent non-blind add
// (any add at all under Serializable), conflicts.
func (t *Transaction) ReadWholeTable() { t.readWhole = true }

// SetIsolationLevel chooses the isolation level (default WriteSerializable).
func (t *Transaction) SetIsolationLevel(l IsolationLevel) { t.isolation = l }

// SetMetrics sets commitInfo.operationMetrics.
func (t *Transaction) SetMetrics(m map[string]string) { t.metrics = maps.Clone(m) }

// TxnID is the unique id written as commitInfo.txnId.
func (t *Transaction) TxnID() string { return t.txnID }

// ObjectName is the data file's object name in the table's store: the
// add's path, URL-decoded (PROTOCOL.md "Add File and Remove File": path is
// a URI relative to the table root). An absolute path is an error.
func (a Add) ObjectName() (string, error) { return decodeAddPath(a.Path) }

// Remove returns the remove action for a, as Spark writes it: partition
// values, size, tags, stats and deletion vector copied, with
// extendedFileMetadata set.
func (a Add) Remove(deletionTimestamp int64, dataChange bool) Remove {
	size := a.Size
	return Remove{
		Path:                    a.Path,
		DeletionTimestamp:       &deletionTimestamp,
		DataChange:              dataChange,
		ExtendedFileMetadata:    true,
		PartitionValues:         maps.Clone(a.PartitionValues),
		Size:                    &size,
		Stats:                   a.Stats,
		Tags:                    maps.Clone(a.Tags),
		DeletionVector:          a.DeletionVector,
		BaseRowID:               a.BaseRowID,
		DefaultRowCommitVersion: a.DefaultRowCommitVersion,
	}
}

// WithDeletionVector returns a as the same data file with deletion vector
// dv (nil: none), as a commit that changes a file's vector adds it
// (PROTOCOL.md "Deletion Vectors": the logical file is the pair of path and
// vector; the old pair is removed in the same commit with a.Remove). The
// statistics stay those of the physical file (numRecords counts every row)
// and are marked tightBounds false, since bounds may now come from deleted
// rows (PROTOCOL.md "Per-file Statistics").
func (a Add) WithDeletionVector(dv *DeletionVector) Add {
	out := a
	out.PartitionValues = maps.Clone(a.PartitionValues)
	out.Tags = maps.Clone(a.Tags)
	out.DeletionVector = dv
	out.DataChange = true
	if st, err := ParseStats(a.Stats); err == nil {
		loose := false
		st.TightBounds = &loose
		if b, err := json.Marshal(st); err == nil {
			out.Stats = string(b)
		}
	}
	return out
}

// isBlindAppend reports whether the transaction only adds data files and
// read no data (reading a txn version is not a data read, as in Spark's
// streaming appends).
func (t *Transaction) isBlindAppend() bool {
	return len(t.removes) == 0 && t.metadata == nil && t.protocol == nil && !t.readWhole &&
		len(t.readPaths) == 0 && len(t.adds) > 0 && allAddsDataChange(t.adds)
}

func allAddsDataChange(adds []Add) bool {
	for _, a := range adds {
		if !a.DataChange {
			return false
		}
	}
	return true
}

// effectiveProtocol and effectiveMetadata are what the commit leaves in place.
func (t *Transaction) effectiveProtocol() *Protocol {
	if t.protocol != nil {
		return t.protocol
	}
	return t.snap.st.protocol
}

func (t *Transaction) effectiveMetadata() *Metadata {
	if t.metadata != nil {
		return t.metadata
	}
	return t.snap.st.metadata
}

// validate checks the per-commit validity rules and protocol gating.
func (t *Transaction) validate() error {
	p, md := t.effectiveProtocol(), t.effectiveMetadata()
	if p == nil || md == nil {
		return fmt.Errorf("%w: version 0 must contain protocol and metaData", ErrInvalidCommit)
	}
	if old := t.snap.st.protocol; old != nil && t.protocol != nil &&
		(t.protocol.MinReaderVersion < old.MinReaderVersion || t.protocol.MinWriterVersion < old.MinWriterVersion) {
		return fmt.Errorf("%w: protocol (%d,%d) would downgrade (%d,%d)", ErrInvalidCommit,
			t.protocol.MinReaderVersion, t.protocol.MinWriterVersion, old.MinReaderVersion, old.MinWriterVersion)
	}
	if old := t.snap.st.protocol; old != nil {
		if err := old.CheckWrite(*t.snap.st.metadata); err != nil {
			return err
		}
	}
	if err := p.CheckWrite(*md); err != nil {
		return err
	}
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidCommit, err)
	}
	if err := validatePartitionColumns(schema, md.PartitionColumns); err != nil {
		return err
	}
	apps := map[string]bool{}
	for _, x := range t.txns {
		if apps[x.AppID] {
			return fmt.Errorf("%w: two txn actions for appId %q", ErrInvalidCommit, x.AppID)
		}
		apps[x.AppID] = true
	}
	seen := map[string]bool{}
	for _, a := range t.adds {
		if a.Path == "" {
			return fmt.Errorf("%w: add with an empty path", ErrInvalidCommit)
		}
		if a.DeletionVector != nil && !p.Supports(FeatureDeletionVectors) {
			return fmt.Errorf("%w: add %q carries a deletion vector but the protocol does not support table feature %s", ErrInvalidCommit, a.Path, FeatureDeletionVectors)
		}
		k := fileKey(a.Path, a.DeletionVector)
		if seen[k] {
			return fmt.Errorf("%w: file %q added twice", ErrInvalidCommit, a.Path)
		}
		seen[k] = true
		for _, c := range md.PartitionColumns {
			if _, ok := a.PartitionValues[c]; !ok {
				return fmt.Errorf("%w: add %q has no value for partition column %q", ErrInvalidCommit, a.Path, c)
			}
		}
		for c := range a.PartitionValues {
			if !slices.Contains(md.PartitionColumns, c) {
				return fmt.Errorf("%w: add %q has a value for %q, which is not a partition column", ErrInvalidCommit, a.Path, c)
			}
		}
	}
	removed := map[string]bool{}
	for _, r := range t.removes {
		k := fileKey(r.Path, r.DeletionVector)
		if removed[k] {
			return fmt.Errorf("%w: file %q removed twice", ErrInvalidCommit, r.Path)
		}
		if seen[k] {
			return fmt.Errorf("%w: file %q both added and removed with the same deletion vector", ErrInvalidCommit, r.Path)
		}
		removed[k] = true
	}
	if boolProp(md.Configuration, PropAppendOnly) {
		for _, r := range t.removes {
			if r.DataChange {
				return fmt.Errorf("%w: remove of %q with dataChange=true", ErrAppendOnly, r.Path)
			}
		}
	}
	return nil
}

// validatePartitionColumns requires partition columns to be distinct
// top-level columns of a schema with case-insensitively unique names.
func validatePartitionColumns(schema value.StructType, cols []string) error {
	names := map[string]bool{}
	for _, f := range schema.Fields {
		l := strings.ToLower(f.Name)
		if names[l] {
			return fmt.Errorf("%w: duplicate column %q (names are case-insensitive)", ErrInvalidCommit, f.Name)
		}
		names[l] = true
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if _, ok := schema.Field(c); !ok {
			return fmt.Errorf("%w: partition column %q is not a top-level column", ErrInvalidCommit, c)
		}
		if seen[c] {
			return fmt.Errorf("%w: partition column %q listed twice", ErrInvalidCommit, c)
		}
		seen[c] = true
	}
	return nil
}

// commitInfo builds the commitInfo written first in the commit.
func (t *Transaction) commitInfo(nowMs int64) *CommitInfo {
	params := map[string]any{}
	for k, v := range t.op.Parameters {
		params[k] = v
	}
	metrics := map[string]any{}
	for k, v := range t.metrics {
		metrics[k] = v
	}
	ci := &CommitInfo{
		Timestamp:           nowMs,
		Operation:           t.op.Name,
		OperationParameters: params,
		OperationMetrics:    metrics,
		IsolationLevel:      string(t.isolation),
		IsBlindAppend:       ptr(t.isBlindAppend()),
		EngineInfo:          "dsdelta/" + EngineVersion,
		TxnID:               t.txnID,
	}
	if t.snap.version >= 0 {
		ci.ReadVersion = ptr(t.snap.version)
	}
	return ci
}

// encode renders the commit file: commitInfo first, then protocol,
// metaData, txns, removes and adds.
func (t *Transaction) encode(ci *CommitInfo) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	put := func(a Action) error { return enc.Encode(a) } // Encode appends '\n'
	if err := put(Action{CommitInfo: ci}); err != nil {
		return nil, err
	}
	if t.protocol != nil {
		if err := put(Action{Protocol: t.protocol}); err != nil {
			return nil, err
		}
	}
	if t.metadata != nil {
		if err := put(Action{MetaData: t.metadata}); err != nil {
			return nil, err
		}
	}
	for i := range t.txns {
		if err := put(Action{Txn: &t.txns[i]}); err != nil {
			return nil, err
		}
	}
	for i := range t.removes {
		if err := enc.Encode(removeLine{Remove: newRemoveJSON(t.removes[i])}); err != nil {
			return nil, err
		}
	}
	for i := range t.adds {
		a := t.adds[i]
		if a.PartitionValues == nil {
			a.PartitionValues = map[string]*string{}
		}
		if err := put(Action{Add: &a}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// removeJSON writes "partitionValues":{} for an unpartitioned table's
// remove with extendedFileMetadata, which promises the field is present
// (Remove's own tag omits empty maps).
type removeJSON struct {
	Remove
	PartitionValues *map[string]*string `json:"partitionValues,omitempty"`
}

type removeLine struct {
	Remove removeJSON `json:"remove"`
}

func newRemoveJSON(r Remove) removeJSON {
	out := removeJSON{Remove: r}
	if r.PartitionValues != nil || r.ExtendedFileMetadata {
		pv := r.PartitionValues
		if pv == nil {
			pv = map[string]*string{}
		}
		out.PartitionValues = &pv
	}
	return out
}

// actions returns the commit's non-commitInfo actions in file order.
func (t *Transaction) actions() []Action {
	var out []Action
	if t.protocol != nil {
		out = append(out, Action{Protocol: t.protocol})
	}
	if t.metadata != nil {
		out = append(out, Action{MetaData: t.metadata})
	}
	for i := range t.txns {
		out = append(out, Action{Txn: &t.txns[i]})
	}
	for i := range t.removes {
		out = append(out, Action{Remove: &t.removes[i]})
	}
	for i := range t.adds {
		out = append(out, Action{Add: &t.adds[i]})
	}
	return out
}

// Commit writes the transaction as the next version with put-if-absent.
// When another writer got that version first, Commit checks whether the
// existing file is its own (a retried upload that had succeeded), else
// reads the winning commits and applies Delta's conflict rules (see
// checkConflicts): on no conflict it retries at the next free version, up
// to Options.MaxCommitAttempts times; on a conflict it returns an error
// wrapping ErrConflict. Every delta.checkpointInterval versions a
// checkpoint is written after the commit; a failed checkpoint is logged,
// not returned, because the commit itself succeeded.
func (t *Transaction) Commit(ctx context.Context) (*Snapshot, error) {
	tbl := t.snap.table
	if t.committed {
		return nil, fmt.Errorf("commit to %s: %w: transaction %s was already committed", tbl.store.URL(), ErrInvalidCommit, t.txnID)
	}
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("commit to %s: %w", tbl.store.URL(), err)
	}
	nowMs := tbl.now().UnixMilli()
	for i := range t.removes {
		if t.removes[i].DeletionTimestamp == nil {
			t.removes[i].DeletionTimestamp = ptr(nowMs)
		}
	}
	ci := t.commitInfo(nowMs)
	body, err := t.encode(ci)
	if err != nil {
		return nil, fmt.Errorf("commit to %s: encode: %w", tbl.store.URL(), err)
	}
	// base accumulates the winners' actions so the returned snapshot is
	// built without re-reading the log.
	base := t.snap.st
	cloned := false
	version := t.snap.version + 1
	for attempt := 1; ; attempt++ {
		name := commitName(version)
		_, err := tbl.store.Write(ctx, name, bytes.NewReader(body), objstore.WriteOptions{IfAbsent: true, ContentType: "application/json"})
		if err == nil {
			break
		}
		if !errors.Is(err, objstore.ErrExists) {
			// The upload may have landed before the error (a timeout on
			// the response): if the version holds our txnId, we committed.
			if own, _ := t.isOwnCommit(ctx, version); own {
				break
			}
			return nil, fmt.Errorf("commit version %d to %s: %w", version, tbl.store.URL(), err)
		}
		winners, own, err := t.readWinners(ctx, version)
		if err != nil {
			return nil, fmt.Errorf("commit to %s: %w", tbl.store.URL(), err)
		}
		if own >= 0 {
			// Our own earlier attempt landed; the error was a client retry.
			version = own
			break
		}
		if t.snap.version < 0 {
			return nil, fmt.Errorf("create %s: %w", tbl.store.URL(), ErrTableExists)
		}
		for _, w := range winners {
			if err := t.checkConflicts(w); err != nil {
				return nil, fmt.Errorf("commit to %s (read version %d): %w", tbl.store.URL(), t.snap.version, err)
			}
		}
		if !cloned {
			base, cloned = base.clone(), true
		}
		for _, w := range winners {
			for j := range w.actions {
				base.apply(&w.actions[j], false)
			}
			version = w.version + 1
		}
		if attempt >= tbl.opts.MaxCommitAttempts {
			return nil, fmt.Errorf("commit to %s: gave up after %d attempts at versions up to %d: %w",
				tbl.store.URL(), attempt, version-1, ErrConflict)
		}
		tbl.opts.Logger.Debug("delta: lost commit race without conflict; retrying", "table", tbl.store.URL(), "version", version, "attempt", attempt)
	}
	t.committed = true
	st := base
	if !cloned {
		st = base.clone()
	}
	for _, a := range t.actions() {
		st.apply(&a, false)
	}
	snap, err := newSnapshot(tbl, version, t.snap.checkpointVersion, nowMs, st)
	if err != nil {
		return nil, err
	}
	if version > 0 && version%checkpointInterval(st.metadata.Configuration) == 0 {
		if err := snap.WriteCheckpoint(ctx); err != nil {
			tbl.opts.Logger.Warn("delta: automatic checkpoint failed", "table", tbl.store.URL(), "version", version, "error", err)
		} else {
			snap.checkpointVersion = version
		}
	}
	return snap, nil
}

// isOwnCommit reports whether the commit at version exists and carries
// this transaction's txnId.
func (t *Transaction) isOwnCommit(ctx context.Context, version int64) (bool, error) {
	store := t.snap.table.store
	info, err := store.Stat(ctx, commitName(version))
	if err != nil {
		return false, err
	}
	c, err := readCommit(ctx, store, info, version)
	if err != nil {
		return false, err
	}
	return c.info != nil && c.info.TxnID == t.txnID, nil
}

// readWinners reads the commits from version up to the latest one. When
// the commit at version carries our txnId, own is that version.
func (t *Transaction) readWinners(ctx context.Context, version int64) (winners []*commitData, own int64, err error) {
	store := t.snap.table.store
	for v := version; ; v++ {
		info, err := store.Stat(ctx, commitName(v))
		if errors.Is(err, objstore.ErrNotExist) {
			if v == version {
				// Deleted between our failed create and the read: should
				// never happen with put-if-absent; treat as corrupt.
				return nil, -1, fmt.Errorf("%w: commit %d vanished after a create conflict", ErrCorruptLog, v)
			}
			return winners, -1, nil
		}
		if err != nil {
			return nil, -1, fmt.Errorf("stat commit %d: %w", v, err)
		}
		c, err := readCommit(ctx, store, info, v)
		if err != nil {
			return nil, -1, err
		}
		if c.info != nil && c.info.TxnID == t.txnID {
			return nil, v, nil
		}
		winners = append(winners, c)
	}
}
