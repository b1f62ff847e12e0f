package cdc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TableSet is the three Delta tables of one source table, each a store
// rooted at the table directory.
type TableSet struct {
	ID         string // "<db>.<table>"
	State      objstore.Store
	History    objstore.Store
	Tombstones objstore.Store
	// Snapshots, when set, keeps the tables' snapshots from read to read,
	// so that reading one again reads only its commits since (see
	// delta.Snapshots): a batch's merge reads each table at every step.
	// Nil reads every snapshot whole.
	Snapshots *delta.Snapshots
}

// AppID is the txn application id of a table's batches.
func AppID(tableID string) string { return "dsdelta/" + tableID }

// Options tune the engine.
type Options struct {
	// TargetFileBytes is the size data files are rolled at (default 128 MiB).
	TargetFileBytes int64
	// Now is the clock (tombstone times, commit times); default time.Now.
	Now func() time.Time
	// Logger receives progress; default slog.Default().
	Logger *slog.Logger
	// Overwrite selects schema mode "overwrite": the tables take the
	// schema of the newest change (dropped columns go, retyped columns are
	// cast, see ConformCast) and their rows are rewritten; a batch older
	// than the change that set the table's schema is conformed to it
	// instead (see PropSchemaOrder). Default: mode "merge".
	Overwrite bool
	// RowGroupBytes sizes the row groups of current-state files (default
	// delta.DefaultRowGroupBytes); a merge copies untouched row groups
	// verbatim, so smaller groups mean less re-encoding per change.
	RowGroupBytes int64
	// StatePartitionColumns partition a current-state table when it is
	// created (existing tables keep their partitioning).
	StatePartitionColumns []string
	// Mode is what the current-state table keeps (default ModeCurrent). A
	// table built in another mode is refused (ErrModeMismatch).
	Mode Mode
	// MaxConflictRetries bounds re-planning after a logical commit conflict
	// (a concurrent compaction rewrote files we read). Default 5.
	MaxConflictRetries int
	// DeletionVectors (config deletion_vectors: on) lets the merge mark the
	// replaced and deleted rows of a current-state file in its deletion
	// vector instead of rewriting the file, so a batch of scattered keys
	// costs what it changes rather than the table. A new state table is
	// created with the feature; an existing one is upgraded by the next
	// state commit. Without it the merge writes no new vector, and a file
	// that has one is rewritten without its deleted rows.
	DeletionVectors bool
	// DVMinFileBytes: with DeletionVectors, a touched state file smaller
	// than this is rewritten instead (default DefaultDVMinFileBytes; a
	// negative value turns the size rule off).
	DVMinFileBytes int64
	// RecommendDVShare: a merge without DeletionVectors that rewrites more
	// than this share of the state table's rows in one step logs a
	// recommendation to turn them on (default DefaultRecommendDVShare).
	RecommendDVShare float64
	// upsertRowsPerFile overrides parallelUpsertRows in tests (0: the
	// constant).
	upsertRowsPerFile int
}

// DefaultDVMinFileBytes is the size below which a touched state file is
// rewritten even with deletion vectors on. A vector is not free: the file
// keeps its deleted rows, which every later read fetches and drops, each
// read fetches the vector too (one more object read per file), and the log
// carries a remove and an add with stats per file and commit. Rewriting a
// file of a MiB or so costs about one object round trip and leaves the
// table clean, so below that size copy-on-write is the cheaper choice.
const DefaultDVMinFileBytes = 1 << 20

// DefaultRecommendDVShare is the share of a state table's rows that one
// copy-on-write step may rewrite before the merge recommends deletion
// vectors: beyond a quarter, the batch's keys are scattered over the table.
const DefaultRecommendDVShare = 0.25

func (o *Options) defaults() {
	if o.TargetFileBytes <= 0 {
		o.TargetFileBytes = 128 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxConflictRetries <= 0 {
		o.MaxConflictRetries = 5
	}
	if o.DVMinFileBytes == 0 {
		o.DVMinFileBytes = DefaultDVMinFileBytes
	}
	if o.RecommendDVShare <= 0 {
		o.RecommendDVShare = DefaultRecommendDVShare
	}
	if o.Mode == "" {
		o.Mode = ModeCurrent
	}
}

// Result counts what a batch did.
type Result struct {
	Events    int64 // changes in the batch
	Keys      int64 // distinct keys after dedupe
	Inserted  int64
	Updated   int64
	Deleted   int64 // rows deleted
	Buried    int64 // deletes of keys without a row (tombstone only)
	Stale     int64 // latest-per-key changes older than what is stored
	Collapsed int64 // changes superseded within the batch
	// Redelivered counts events already in the history table (the same key
	// and order delivered again, e.g. a re-written file): kept once.
	Redelivered int64
	// HistoryFilesCopied counts the Batch.HistoryFiles the history took
	// as files, HistoryRowsCopied their rows.
	HistoryFilesCopied int
	HistoryRowsCopied  int64

	HistoryVersion, StateVersion, TombstoneVersion int64
	// Already* are set when that table had this batch's txn already: a
	// re-run after a crash or a duplicate delivery.
	AlreadyHistory, AlreadyState, AlreadyTombstones bool
	FilesRead, FilesRewritten, FilesAdded           int
	// Row groups of rewritten files copied verbatim (no changed key in
	// them) or decoded and re-encoded, and the rows re-encoded.
	RowGroupsCopied, RowGroupsDecoded int
	RowsReencoded                     int64
	// DeletionVectors counts the state files given a new or extended
	// deletion vector instead of a rewrite.
	DeletionVectors int
	// RowsSpareable counts the rows a copy-on-write step decoded in the
	// state files it rewrote, which deletion vectors would have spared
	// (none in a step that widened a column: it rewrites every row).
	RowsSpareable int64
}

// Add adds b's counters to r and takes b's versions (those of the later
// batch or step), as a merge of several batches or steps sums them.
func (r *Result) Add(b Result) {
	r.Events += b.Events
	r.Keys += b.Keys
	r.Inserted += b.Inserted
	r.Updated += b.Updated
	r.Deleted += b.Deleted
	r.Buried += b.Buried
	r.Stale += b.Stale
	r.Collapsed += b.Collapsed
	r.Redelivered += b.Redelivered
	r.HistoryFilesCopied += b.HistoryFilesCopied
	r.HistoryRowsCopied += b.HistoryRowsCopied
	r.FilesRead += b.FilesRead
	r.FilesRewritten += b.FilesRewritten
	r.FilesAdded += b.FilesAdded
	r.RowGroupsCopied += b.RowGroupsCopied
	r.RowGroupsDecoded += b.RowGroupsDecoded
	r.RowsReencoded += b.RowsReencoded
	r.DeletionVectors += b.DeletionVectors
	r.RowsSpareable += b.RowsSpareable
	r.HistoryVersion, r.StateVersion, r.TombstoneVersion = b.HistoryVersion, b.StateVersion, b.TombstoneVersion
}

// Apply applies one batch to the three tables exactly once: each table's
// commit carries txn{AppID(table), seq}, and a table whose snapshot already
// has seq skips its commit. The batch must be the same on a re-run (the
// coordinator guarantees it). Its errors say which table of the three and
// what failed, not t.ID or seq: the caller, which chose them, names them
// once (pipeline's "merge TABLE batch SEQ: ...").
func Apply(ctx context.Context, t TableSet, seq int64, b Batch, opts Options) (Result, error) {
	return ApplyStep(ctx, t, Step{Seq: seq, Last: true}, b, opts)
}

// ApplyStep applies one step of a batch (see Step) to the three tables
// exactly once. The step's events must be the same on a re-run. Its errors
// name neither t.ID nor the batch, as Apply's.
func ApplyStep(ctx context.Context, t TableSet, step Step, b Batch, opts Options) (Result, error) {
	seq := step.Seq
	opts.defaults()
	if err := ValidateSource(b.Source); err != nil {
		return Result{}, err
	}
	// A logical conflict means another writer committed meanwhile: a
	// compaction that rewrote files we read, or another holder applying
	// this very batch (a stale lease). Planning again from fresh snapshots
	// resolves both: the second finds the batch's txn and skips.
	for attempt := 0; ; attempt++ {
		res, err := applyOnce(ctx, t, step, b, opts)
		if err == nil || !errors.Is(err, delta.ErrConflict) || attempt >= opts.MaxConflictRetries {
			return res, err
		}
		opts.Logger.InfoContext(ctx, "merge conflicted with a concurrent commit; planning again", "table", t.ID, "batch", seq, "attempt", attempt+1, "error", err)
	}
}

// applyOnce writes the history and the state side (tombstones, state) at
// once, on two cores, and commits them in the order exactly-once relies
// on: the history first, then the tombstones, then the state. The state
// side needs the history's schema after the batch, known before the
// history's rows are written, and waits for the history's commit before
// its own.
func applyOnce(ctx context.Context, t TableSet, step Step, b Batch, opts Options) (Result, error) {
	res := Result{Events: int64(len(b.Changes)), HistoryVersion: -1, StateVersion: -1, TombstoneVersion: -1}
	if len(b.Key) == 0 { // history-only table
		_, _, _, err := applyHistory(ctx, t, step, b, opts, &res, nil, nil, nil)
		if err != nil {
			return res, fmt.Errorf("history: %w", err)
		}
		return res, nil
	}
	type plan struct {
		source value.StructType
		order  []byte
	}
	planned := make(chan plan, 1)
	committed := make(chan struct{})
	// opened carries the outcome of opening the state side's tables: the
	// history commits only once they are open and their mode is the
	// configured one, so that a batch never reaches the history of a
	// table it cannot be merged into.
	opened := make(chan error, 1)
	known := newKnownChannel()
	sres := res
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, _, _, err := applyHistory(gctx, t, step, b, opts, &res, func(source value.StructType, order []byte) {
			planned <- plan{source, order}
		}, func(ctx context.Context) error {
			select {
			case err := <-opened:
				if err != nil {
					return errStateFailed
				}
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, known)
		if errors.Is(err, errStateFailed) {
			return nil // the state side returns its own error
		}
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		close(committed)
		return nil
	})
	g.Go(func() error {
		select {
		case p := <-planned:
			defer known.publish(checkAll) // unless the lookup published
			return applyState(gctx, t, step, b, p.source, p.order, opts, &sres, committed, opened, known)
		case <-gctx.Done():
			return gctx.Err() // the history failed: its error is the one returned
		}
	})
	err := g.Wait()
	// The state side's result, with what the history side counted
	// (applyHistory sets only these).
	sres.HistoryVersion, sres.AlreadyHistory, sres.Redelivered = res.HistoryVersion, res.AlreadyHistory, res.Redelivered
	sres.HistoryFilesCopied, sres.HistoryRowsCopied = res.HistoryFilesCopied, res.HistoryRowsCopied
	sres.FilesAdded += res.FilesAdded
	return sres, err
}

// awaitHistory blocks until the batch's history commit succeeded.
func awaitHistory(ctx context.Context, committed <-chan struct{}) error {
	select {
	case <-committed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openTombstones opens (or creates) a table's tombstone table.
func openTombstones(ctx context.Context, t TableSet, schema value.StructType, key []string) (*delta.Snapshot, error) {
	co := delta.CreateOptions{
		Schema: schema, Name: t.ID + "_tombstones", Configuration: expiryRecordedConf(map[string]string{PropKey: strings.Join(key, ",")}),
		Description: "dsdelta tombstones of " + t.ID + ": deleted keys and the position of their delete",
	}
	if err := createWithStats(&co, statsNeeds(roleTombstones, key, ModeCurrent)); err != nil {
		return nil, err
	}
	return openOrCreate(ctx, t.Snapshots, t.Tombstones, t.ID, roleTombstones, co)
}

// replaceSchema is schema mode "overwrite": the table takes the incoming
// columns; rows are rewritten when a column is dropped or retyped. Key
// columns must keep their type (tombstones compare keys by value).
func replaceSchema(snap *delta.Snapshot, current, incoming value.StructType, full func(value.StructType) value.StructType, key []string) (*delta.Metadata, value.StructType, bool, error) {
	ch := CompareSchemas(current, incoming)
	if len(ch.Added)+len(ch.Dropped)+len(ch.Widened)+len(ch.Retyped) == 0 {
		return nil, current, false, nil
	}
	for _, r := range append(append([]Retype(nil), ch.Widened...), ch.Retyped...) {
		for _, k := range key {
			if strings.EqualFold(k, r.Column) {
				return nil, current, false, fmt.Errorf("%w: primary key %s", ErrSchemaConflict, r)
			}
		}
	}
	next := value.StructType{Fields: nullable(incoming.Fields)}
	m := snap.Metadata()
	m.Configuration = maps.Clone(m.Configuration) // the snapshot's own map
	m.SchemaString = full(next).SchemaString()
	rewrite := len(ch.Dropped)+len(ch.Widened)+len(ch.Retyped) > 0
	return &m, next, rewrite, nil
}

// conformFor conforms a stored row to a table's new schema: converting
// exactly in merge mode, casting in overwrite mode.
func conformFor(overwrite bool, row []any, from, to value.StructType) ([]any, error) {
	if overwrite {
		return ConformCast(row, from, to), nil
	}
	return Conform(row, from, to)
}

// Table properties that say which source table and role a Delta table
// serves; they stop two source tables from sharing a directory (source
// table "orders_log" would otherwise land on the history of "orders").
const (
	PropTable = "dsdelta.table"
	PropRole  = "dsdelta.role"
	// PropKey lists the primary-key columns (comma-separated) of state and
	// tombstone tables; compaction clusters by them.
	PropKey = "dsdelta.key"
)

// ErrPathCollision: a Delta table at the path belongs to another source
// table or role.
var ErrPathCollision = errors.New("delta table path is used by another table")

// openOrCreate returns the latest snapshot, creating the table when absent,
// and checks that an existing table is ours for this id and role.
func openOrCreate(ctx context.Context, snaps *delta.Snapshots, store objstore.Store, id, role string, co delta.CreateOptions) (*delta.Snapshot, error) {
	tab := delta.Open(store)
	snap, err := snaps.Latest(ctx, tab)
	if errors.Is(err, delta.ErrNotATable) {
		if co.Configuration == nil {
			co.Configuration = map[string]string{}
		}
		co.Configuration[PropTable] = id
		co.Configuration[PropRole] = role
		snap, err = tab.Create(ctx, co)
		if errors.Is(err, delta.ErrTableExists) { // another writer created it first
			snap, err = tab.Snapshot(ctx)
		}
	}
	if err != nil {
		return nil, err
	}
	conf := snap.Configuration()
	if gotID, gotRole := conf[PropTable], conf[PropRole]; gotID != id || gotRole != role {
		return nil, fmt.Errorf("%w: %s holds %s %q, not %s %q", ErrPathCollision, store.URL(), gotRole, gotID, role, id)
	}
	return snap, nil
}

// evolve returns the metadata with the merged source schema, or nil when the
// table's schema already holds every incoming column at its type; widened
// reports that existing columns changed type (or, in overwrite mode, were
// dropped), so the table's existing files must be rewritten with converted
// values in the same commit. In overwrite mode, order is the ordering key
// as of which incoming holds and nextOrder that of the table's resulting
// schema (see PropSchemaOrder); merge mode ignores orders.
func evolve(snap *delta.Snapshot, incoming value.StructType, order []byte, full func(value.StructType) value.StructType, key []string, overwrite bool) (md *delta.Metadata, merged value.StructType, nextOrder []byte, widened bool, err error) {
	if overwrite {
		return overwriteEvolve(snap, incoming, order, full, key)
	}
	md, merged, widened, err = mergeEvolve(snap, incoming, full, key)
	return md, merged, nil, widened, err
}

// mergeEvolve is evolve in schema mode "merge".
func mergeEvolve(snap *delta.Snapshot, incoming value.StructType, full func(value.StructType) value.StructType, key []string) (md *delta.Metadata, merged value.StructType, widened bool, err error) {
	current := SourceSchema(snap.Schema())
	merged, ch, err := MergeSchemas(current, incoming)
	if err != nil {
		return nil, current, false, err
	}
	for _, w := range ch.Widened {
		for _, k := range key {
			if strings.EqualFold(k, w.Column) {
				// Tombstones and lookups compare keys by value; a key
				// column keeps its type.
				return nil, current, false, fmt.Errorf("%w: primary key %s", ErrSchemaConflict, w)
			}
		}
	}
	if len(ch.Added) == 0 && len(ch.Widened) == 0 {
		return nil, current, false, nil
	}
	m := snap.Metadata()
	m.SchemaString = full(merged).SchemaString()
	return &m, merged, len(ch.Widened) > 0, nil
}

// applyHistory appends the batch to the history table. It returns the
// history's source schema after the batch, which the state table follows,
// and in overwrite mode the order of the change that set it.
//
// stateReady, when set, is waited on before the commit: the state side
// must have opened its tables first.
//
// planned, when set, is told the history's source schema after the batch
// (and its order) as soon as they are known, before any row is written.
//
// known, when set, carries what the state side's lookup found (dedup.go),
// which the duplicate check waits for; nil checks every event.
func applyHistory(ctx context.Context, t TableSet, step Step, b Batch, opts Options, res *Result, planned func(value.StructType, []byte), stateReady func(context.Context) error, known *knownChannel) (*delta.Snapshot, value.StructType, []byte, error) {
	order := BatchOrder(b)
	co := delta.CreateOptions{
		Schema: HistorySchema(b.Source), PartitionColumns: []string{ColSourceDate},
		Name: t.ID + "_log", Description: "dsdelta history of " + t.ID + ": every change event, append-only",
	}
	if opts.Overwrite {
		co.Configuration = withSchemaOrder(nil, order)
	}
	need := statsNeeds(roleHistory, b.Key, opts.Mode)
	if err := createWithStats(&co, need); err != nil {
		return nil, value.StructType{}, nil, err
	}
	snap, err := openOrCreate(ctx, t.Snapshots, t.History, t.ID, roleHistory, co)
	if err != nil {
		return nil, value.StructType{}, nil, err
	}
	md, source, sourceOrder, widened, err := evolve(snap, b.Source, order, HistorySchema, b.Key, opts.Overwrite)
	if err == nil {
		md, err = metadataWithStats(snap, md, need)
	}
	if err != nil {
		return nil, value.StructType{}, nil, err
	}
	if opts.Overwrite && bytes.Compare(order, sourceOrder) < 0 && !value.Equal(source, b.Source) {
		opts.Logger.InfoContext(ctx, "batch is older than the change that set the table's schema; its rows take the table's schema",
			"table", t.ID, "batch", step.Seq, "batch_schema", b.Source.String(), "table_schema", source.String())
	}
	if planned != nil {
		planned(source, sourceOrder)
	}
	if step.applied(t.ID, snap) {
		res.AlreadyHistory = true
		res.HistoryVersion = snap.Version()
		return snap, source, sourceOrder, nil
	}
	schema := HistorySchema(source)
	from := HistorySchema(b.Source)
	k, err := known.await(ctx)
	if err != nil {
		return nil, source, nil, err
	}
	dup, broken, err := historyDuplicates(ctx, snap, b, source, k)
	if err != nil {
		return nil, source, nil, fmt.Errorf("look up earlier deliveries: %w", err)
	}
	if err := tellBroken(ctx, b, broken); err != nil {
		return nil, source, nil, err
	}
	// One rolling writer per source date partition, in row groups small
	// enough that their source-timestamp bounds let a later batch's
	// duplicate check skip most of them (historyDuplicates).
	conf := snap.Configuration()
	if md != nil {
		conf = md.Configuration
	}
	w := newRolling(ctx, t.History, delta.WriteOptions{Schema: schema, PartitionColumns: []string{ColSourceDate}, Configuration: conf, RowGroupRows: historyRowGroupRows}, opts.TargetFileBytes)
	rows, err := writeBatchHistory(w, b, dup, from, schema, opts.Overwrite, res)
	if err != nil {
		w.Abort()
		return nil, source, nil, err
	}
	// A widened column (or, in overwrite mode, a dropped or retyped one):
	// every existing file is rewritten with converted values in this same
	// commit (history is append-only otherwise).
	var removes []delta.Remove
	if widened {
		if removes, err = rewriteHistory(ctx, t.History, snap, w, schema, opts); err != nil {
			w.Abort()
			return nil, source, nil, err
		}
	}
	n, err := writeBrokenCandidates(ctx, w, b, broken, dup, schema, opts.Overwrite, res)
	if err != nil {
		w.Abort()
		return nil, source, nil, err
	}
	rows += n
	files := b.HistoryFiles
	if step.Last {
		for i, c := range b.Candidates {
			if !broken[i] {
				files = append(files, c.Parts...)
			}
		}
	}
	copies, n, err := addHistoryFiles(ctx, t.History, snap, w, files, schema, md == nil && !widened, opts.Overwrite, res)
	if err != nil {
		w.Abort()
		return nil, source, nil, err // the copies made stay unreferenced: vacuum removes them
	}
	rows += n
	adds, err := w.Close()
	if err != nil {
		return nil, source, nil, err
	}
	adds = append(adds, copies...)
	tx := snap.NewTransaction(delta.Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Append", "partitionBy": `["` + ColSourceDate + `"]`}})
	if widened {
		tx = snap.NewTransaction(delta.Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Overwrite", "partitionBy": `["` + ColSourceDate + `"]`}})
		tx.ReadWholeTable()
		tx.Remove(removes...)
	}
	tx.Add(adds...)
	step.setTxn(tx, t.ID)
	if md != nil {
		tx.SetMetadata(*md)
	}
	tx.SetMetrics(map[string]string{"numFiles": strconv.Itoa(len(adds)), "numOutputRows": strconv.FormatInt(rows, 10), "numOutputBytes": strconv.FormatInt(sumSize(adds), 10)})
	if stateReady != nil {
		if err := stateReady(ctx); err != nil {
			return nil, source, nil, err // the written files stay unreferenced: vacuum removes them
		}
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		return nil, source, nil, err
	}
	res.HistoryVersion = committed.Version()
	res.FilesAdded += len(adds)
	return committed, source, sourceOrder, nil
}

// tellBroken tells b.OnBroken which of the batch's Candidates the step
// breaks, in their order.
func tellBroken(ctx context.Context, b Batch, broken map[int]bool) error {
	if len(b.Candidates) == 0 || b.OnBroken == nil {
		return nil
	}
	ids := []string{}
	for i, c := range b.Candidates {
		if broken[i] {
			ids = append(ids, c.ID)
		}
	}
	if err := b.OnBroken(ctx, ids); err != nil {
		return fmt.Errorf("record the history copies the step breaks: %w", err)
	}
	return nil
}

// writeBrokenCandidates writes the rows of the candidates the step breaks
// (CopyCandidate.writeBroken), and returns how many.
func writeBrokenCandidates(ctx context.Context, w *delta.RollingWriter, b Batch, broken map[int]bool, dup map[string]bool, schema value.StructType, overwrite bool, res *Result) (int64, error) {
	rows := int64(0)
	for i, c := range b.Candidates {
		if !broken[i] {
			continue
		}
		n, err := c.writeBroken(ctx, w, b.Key, dup, schema, overwrite, res)
		rows += n
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// writeBatchHistory writes the batch's events to w, in the history's
// schema, but for those in a history file of the batch and those dup
// names (earlier deliveries), which it adds to as it goes, so an event
// twice in the batch is written once. It returns the rows written.
func writeBatchHistory(w *delta.RollingWriter, b Batch, dup map[string]bool, from, schema value.StructType, overwrite bool, res *Result) (int64, error) {
	rows := int64(0)
	same := value.Equal(from, schema) // checked once, not per row
	for _, c := range b.Changes {
		if c.InHistory {
			continue // in a history file of the batch
		}
		if len(b.Key) > 0 {
			id := c.Text() + "\x00" + string(c.Order)
			if dup[id] {
				res.Redelivered++
				continue
			}
			dup[id] = true
		}
		// In overwrite mode a batch older than the history's schema is
		// cast to it like the table's own rows.
		row, err := c.History, error(nil)
		if !same {
			row, err = conformFor(overwrite, c.History, from, schema)
		}
		if err == nil {
			err = w.Write(row)
		}
		if err != nil {
			return rows, err
		}
		rows++
	}
	return rows, nil
}

// rewriteHistory writes every row of the history's files to w converted
// to schema, and returns their removes.
func rewriteHistory(ctx context.Context, store objstore.Store, snap *delta.Snapshot, w *delta.RollingWriter, schema value.StructType, opts Options) ([]delta.Remove, error) {
	var removes []delta.Remove
	old := snap.Schema()
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			r, err := conformFor(opts.Overwrite, row, old, schema)
			if err != nil {
				return err
			}
			return w.Write(r)
		})
		if err != nil {
			return nil, fmt.Errorf("widen %s: %w", f.Path, err)
		}
		removes = append(removes, f.Remove(opts.Now().UnixMilli(), true))
	}
	return removes, nil
}

// addHistoryFiles adds the batch's history files: copied when copyable
// (the commit changes no schema) and they are what w would write, else
// their rows are written to w. It returns the copies' adds and the rows
// of both.
func addHistoryFiles(ctx context.Context, store objstore.Store, snap *delta.Snapshot, w *delta.RollingWriter, files []HistoryFile, schema value.StructType, copyable, overwrite bool, res *Result) ([]delta.Add, int64, error) {
	var toCopy []HistoryFile
	rows := int64(0)
	for _, hf := range files {
		if copyable && value.Equal(hf.Schema, schema) && TakesFiles(snap.Metadata()) {
			toCopy = append(toCopy, hf)
			continue
		}
		err := hf.rows(ctx, func(row []any) error {
			r, err := conformFor(overwrite, row, hf.Schema, schema)
			if err == nil {
				err = w.Write(r)
			}
			rows++
			return err
		})
		if err != nil {
			return nil, rows, fmt.Errorf("history file %s: %w", hf.Add.Path, err)
		}
	}
	// Copies are object reads and writes: several at once.
	copies := make([]delta.Add, len(toCopy))
	ids := make([]string, len(toCopy)) // drawn in turn: see CopyDataFileAs
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	cg, cctx := errgroup.WithContext(ctx)
	cg.SetLimit(8)
	for i, hf := range toCopy {
		cg.Go(func() error {
			var err error
			copies[i], err = delta.CopyDataFileAs(cctx, hf.Store, hf.Add, store, []string{ColSourceDate}, ids[i])
			return err
		})
	}
	if err := cg.Wait(); err != nil {
		return nil, rows, err
	}
	for _, hf := range toCopy {
		rows += hf.Rows
		res.HistoryFilesCopied++
		res.HistoryRowsCopied += hf.Rows
	}
	return copies, rows, nil
}

// historyRowGroupRows caps the rows of a history row group: about a
// minute of a busy table's changes, or a few of a backfill's.
const historyRowGroupRows = 16 << 10

// historyDuplicates returns the (key, order) identities of batch events that
// the history table already holds, so a re-delivered event is kept once,
// and the Candidates (by index) with such an event, which the step breaks.
// Only the candidates that known names are looked for (dedup.go): most
// batches have none and read nothing. An earlier delivery has the event's
// ordering key, which holds its source timestamp, so only the source-date
// partitions of the candidates and the files whose source-timestamp and
// first-key bounds can hold one are read; within them, only the pages of
// the key column whose bounds can hold a candidate's key (readKeyed), and
// of the order column only the rows of such keys. A backfill's events
// share one source date and timestamp, and every history file spans the
// key range, so the pages are what bounds the read there.
func historyDuplicates(ctx context.Context, snap *delta.Snapshot, b Batch, source value.StructType, known knownOrders) (map[string]bool, map[int]bool, error) {
	out, broken := map[string]bool{}, map[int]bool{}
	if len(b.Key) == 0 || snap.NumFiles() == 0 {
		return out, broken, nil
	}
	// Only the candidates (see dedup.go) are looked for in the history:
	// an event newer than all the tables record of its key is new to it,
	// while the change they record last of its key is in it. The events
	// of a history file of the batch were found new to it when the batch
	// was planned (an earlier release's plan, which copies in the first
	// step); those of a copy candidate are looked for as any.
	var changes []Change
	var buf []byte
	for _, c := range b.Changes {
		if c.InHistory && c.Candidate == 0 {
			continue
		}
		switch known.classify(c, &buf) {
		case seenMaybe:
			changes = append(changes, c)
		case seenOnce:
			out[c.Text()+"\x00"+string(c.Order)] = true
			if c.Candidate > 0 {
				broken[int(c.Candidate)-1] = true
			}
		}
	}
	if len(changes) == 0 {
		return out, broken, nil
	}
	if err := readDuplicates(ctx, snap, b.Key, changes, source, out); err != nil {
		return nil, nil, err
	}
	for _, c := range changes {
		if c.Candidate > 0 && out[c.Text()+"\x00"+string(c.Order)] {
			broken[int(c.Candidate)-1] = true
		}
	}
	return out, broken, nil
}

// readDuplicates adds to out the identities of changes that the history
// snap holds (see historyDuplicates).
func readDuplicates(ctx context.Context, snap *delta.Snapshot, keyNames []string, changes []Change, source value.StructType, out map[string]bool) error {
	keyIdx, err := KeyIndexes(source, keyNames)
	if err != nil {
		return err
	}
	dates := map[value.Days]bool{}
	for _, c := range changes {
		dates[value.DaysOf(c.SourceTS.Time())] = true
	}
	partitions := make(map[string]bool, len(dates))
	for d := range dates {
		partitions[d.String()] = true
	}
	var files []delta.Add
	for _, f := range snap.Files() {
		if d := f.PartitionValues[ColSourceDate]; d == nil || partitions[*d] {
			files = append(files, f)
		}
	}
	ts := sortedSourceTimes(changes)
	if files = pruneByTimes(files, ts); len(files) == 0 {
		return nil
	}
	first := source.Fields[keyIdx[0]]
	if lo, hi, ok := firstKeyBounds(changes); ok {
		files = pruneByBounds(files, first.Name, first.Type, func(flo, fhi any) bool {
			if reflect.TypeOf(flo) != reflect.TypeOf(lo) || reflect.TypeOf(fhi) != reflect.TypeOf(hi) {
				return true // a widened column: not comparable
			}
			return value.Compare(hi, flo) >= 0 && value.Compare(lo, fhi) <= 0
		})
		if len(files) == 0 {
			return nil
		}
	}
	names := make([]string, len(keyIdx))
	for i, k := range keyIdx {
		names[i] = source.Fields[k].Name
	}
	// Each key is looked for once, with the orders wanted of it: the
	// probe holds each key once, sorted, and a row of a wanted key is a
	// duplicate when its order is one of them. lookup reads, of each file,
	// only the pages whose key bounds can hold a wanted key (a staged
	// part, which history files are copied from, is sorted by key), and
	// tests the stored keys as they are: a check of a few late events
	// costs their pages, not a conversion of every row.
	type wanted struct {
		text   string
		orders map[string]bool
	}
	found := make(map[string]*wanted, len(changes))
	var probe []Change
	for _, c := range changes {
		text := c.Text()
		w := found[text]
		if w == nil {
			w = &wanted{text: text, orders: map[string]bool{}}
			found[text] = w
			probe = append(probe, Change{Key: c.Key, KeyText: text})
		}
		w.orders[string(c.Order)] = true
	}
	slices.SortFunc(probe, func(a, b Change) int { return value.CompareKeys(a.Key, b.Key) })
	isWanted := func(w *wanted, order []byte) bool { return w.orders[string(order)] }
	return lookup(ctx, snap, files, names, probe, found, isWanted, func(w *wanted, order []byte, _ string, _ int64) {
		out[w.text+"\x00"+string(order)] = true
	})
}

// firstKeyBounds returns the least and greatest first key value of the
// changes; ok is false when one is null or they differ in Go type (bounds
// then say nothing).
func firstKeyBounds(changes []Change) (lo, hi any, ok bool) {
	for i, c := range changes {
		v := c.Key[0]
		if v == nil || (i > 0 && reflect.TypeOf(v) != reflect.TypeOf(lo)) {
			return nil, nil, false
		}
		if i == 0 || value.Compare(v, lo) < 0 {
			lo = v
		}
		if i == 0 || value.Compare(v, hi) > 0 {
			hi = v
		}
	}
	return lo, hi, len(changes) > 0
}

// sortedSourceTimes returns the source timestamps of the changes, sorted.
func sortedSourceTimes(changes []Change) []value.Micros {
	ts := make([]value.Micros, len(changes))
	for i, c := range changes {
		ts[i] = c.SourceTS
	}
	slices.Sort(ts)
	return ts
}

// holdsTime reports whether one of the sorted times lies within [lo, hi];
// bounds of another type say nothing: true.
func holdsTime(ts []value.Micros, lo, hi any) bool {
	l, okl := lo.(value.Micros)
	h, okh := hi.(value.Micros)
	if !okl || !okh {
		return true
	}
	i, _ := slices.BinarySearch(ts, l)
	return i < len(ts) && ts[i] <= h
}

// pruneBySourceTime keeps the history files whose source-timestamp bounds
// can hold the source timestamp of one of the changes. An event delivered
// again has the same ordering key, and every ordering key holds the
// event's source timestamp, so a file whose bounds exclude every change's
// cannot hold an earlier delivery. Batches of new changes (CDC moving on,
// a backfill read file after file) mostly fall outside every file's
// bounds, so finding re-deliveries costs what the overlap is, not the
// history. Files without usable stats are kept.
func pruneBySourceTime(files []delta.Add, changes []Change) []delta.Add {
	if len(files) == 0 {
		return files
	}
	return pruneByTimes(files, sortedSourceTimes(changes))
}

// pruneByTimes is pruneBySourceTime given the changes' sorted times.
func pruneByTimes(files []delta.Add, ts []value.Micros) []delta.Add {
	return pruneByBounds(files, ColSourceTimestamp, value.Timestamp, func(lo, hi any) bool { return holdsTime(ts, lo, hi) })
}

func sumSize(adds []delta.Add) int64 {
	var n int64
	for _, a := range adds {
		n += a.Size
	}
	return n
}

// applyState merges the batch into the state and tombstone tables: lookup
// (what the tables hold of the step's keys), plan (planState: what happens
// to each key, pure), execute (the tombstone and the state commits). source
// is the history's source schema after the batch and order (overwrite
// mode) the order of the change that set it: the state table follows both.
func applyState(ctx context.Context, t TableSet, step Step, b Batch, source value.StructType, order []byte, opts Options, res *Result, historyCommitted <-chan struct{}, opened chan<- error, known *knownChannel) error {
	st, err := openState(ctx, t, step, b, source, order, opts)
	if err == nil {
		st.known = known
	}
	opened <- err
	if err != nil {
		return err
	}
	res.AlreadyState, res.AlreadyTombstones = st.stateDone, st.tombDone
	res.StateVersion, res.TombstoneVersion = st.stateSnap.Version(), st.tombSnap.Version()
	if st.stateDone && st.tombDone {
		return nil
	}
	switch opts.Mode {
	case ModeSoftDelete:
		return st.applySoftDelete(ctx, res, historyCommitted)
	case ModeSCD2:
		return st.applySCD2(ctx, res, historyCommitted)
	}
	keys := latestSorted(b.Changes)
	res.Keys = int64(len(keys))
	res.Collapsed = res.Events - res.Keys
	found, err := st.lookup(ctx, keys)
	if err != nil {
		return err
	}
	k := newKnownOrders(st.tombSnap, len(found))
	for text, s := range found {
		k.note(text, s.rowOrder)
		k.note(text, s.tombOrder)
	}
	st.known.publish(k)
	res.FilesRead = len(st.candidates)
	plan := planState(keys, found)
	return st.commitPlan(ctx, plan, res, historyCommitted)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// prune keeps the files whose statistics for the first key column can hold
// one of the keys (sorted by key). Files without usable stats are kept.
func prune(files []delta.Add, col string, typ value.Type, keys []Change) []delta.Add {
	return pruneByBounds(files, col, typ, func(lo, hi any) bool {
		// First key >= lo, then check it is <= hi.
		i := sort.Search(len(keys), func(i int) bool { return value.Compare(keys[i].Key[0], lo) >= 0 })
		return i < len(keys) && value.Compare(keys[i].Key[0], hi) <= 0
	})
}

// pruneByBounds keeps the files whose statistics bounds of column col (of
// type typ) overlap what the caller looks for, and the files whose stats
// say nothing of col; files that stats say are empty go.
func pruneByBounds(files []delta.Add, col string, typ value.Type, overlaps func(lo, hi any) bool) []delta.Add {
	var out []delta.Add
	for _, f := range files {
		st, err := delta.ParseStats(f.Stats)
		if err != nil {
			out = append(out, f)
			continue
		}
		if st.NumRecords == 0 && f.Stats != "" {
			continue
		}
		lo, hi, ok := st.MinMax(col, typ)
		if !ok || overlaps(lo, hi) {
			out = append(out, f)
		}
	}
	return out
}

// firstKeyFilter returns the row-group filter on key column col that keeps a
// row group when one of firsts (the first key values of a batch's keys,
// sorted by value.Compare) lies within its bounds — prune's test for files,
// applied to the row groups of a file — and its bloom filter of col, if it
// has one, may hold one of them (state and tombstone files have one on the
// first key column; for composite keys that is enough, the lookup only
// needs to rule row groups out). It is nil, reading every row group,
// when a first value is null (bounds say nothing of null keys) or the values
// differ in type.
func firstKeyFilter(col string, firsts []any) *delta.RowGroupFilter {
	if len(firsts) == 0 {
		return nil
	}
	typ := reflect.TypeOf(firsts[0])
	for _, v := range firsts {
		if v == nil || reflect.TypeOf(v) != typ {
			return nil
		}
	}
	return &delta.RowGroupFilter{Column: col, Values: firsts, Keep: func(lo, hi any) bool {
		// Bounds come in the table's type; a batch whose key type differs
		// (a widened column) cannot be compared with them: keep.
		if reflect.TypeOf(lo) != typ || reflect.TypeOf(hi) != typ {
			return true
		}
		i := sort.Search(len(firsts), func(i int) bool { return value.Compare(firsts[i], lo) >= 0 })
		return i < len(firsts) && value.Compare(firsts[i], hi) <= 0
	}}
}

// lookup reads the key columns and the order of candidate files and reports
// every row whose key is in found and whose order keep (when not nil)
// accepts, with its file and physical position (the row index a deletion
// vector marks); keys (each with its KeyText, which names it in found) are
// the batch keys sorted by value.CompareKeys (see readKeyedWhere).
func lookup[S any](ctx context.Context, snap *delta.Snapshot, files []delta.Add, keyNames []string, keys []Change, found map[string]*S, keep func(s *S, order []byte) bool, hit func(s *S, order []byte, path string, pos int64)) error {
	n := len(keyNames)
	cols := append(slices.Clone(keyNames), ColOrder)
	keyIdx := make([]int, n)
	for i := range keyIdx {
		keyIdx[i] = i
	}
	orderOf := func(row []any) []byte {
		order, _ := row[n].([]byte)
		return order
	}
	var keepRow func(s *S, row []any) bool
	if keep != nil {
		keepRow = func(s *S, row []any) bool { return keep(s, orderOf(row)) }
	}
	return readKeyedWhere(ctx, snap, files, cols, keyIdx, keyNames[0], keys, found, keepRow, func(s *S, row []any, path string, pos int64) error {
		hit(s, orderOf(row), path, pos)
		return nil
	})
}

// readKeyed reads the columns cols (nil: all) of files and calls hit with
// every row whose key (the values at keyIdx of the row read) is in found,
// its file and its physical position (the row index a deletion vector
// marks). probe are the wanted keys, each with its KeyText (which names it
// in found), sorted by value.CompareKeys: they skip the row groups of
// firstCol that cannot hold one and, through the Parquet page index
// (delta.ReadOptions.OnlyValues), the pages, so the cost follows the
// probe, not the table. Files are read on all cores (found is only read
// meanwhile), walking each file and the sorted probe together where the
// key allows (keyJoin); the hits are reported afterwards, in file order,
// on the caller's goroutine, each with a row of its own.
func readKeyed[S any](ctx context.Context, snap *delta.Snapshot, files []delta.Add, cols []string, keyIdx []int, firstCol string, probe []Change, found map[string]*S, hit func(s *S, row []any, path string, pos int64) error) error {
	return readKeyedWhere(ctx, snap, files, cols, keyIdx, firstCol, probe, found, nil, hit)
}

// readKeyedWhere is readKeyed whose hits are only the rows keep (when not
// nil) accepts, asked on the reading goroutines (found and what it points
// to are only read meanwhile): the rows a read holds until it reports
// them are those, not every row of a found key. The history holds every
// version of a key, and a hot key may have millions.
func readKeyedWhere[S any](ctx context.Context, snap *delta.Snapshot, files []delta.Add, cols []string, keyIdx []int, firstCol string, probe []Change, found map[string]*S, keep func(s *S, row []any) bool, hit func(s *S, row []any, path string, pos int64) error) error {
	if len(files) == 0 {
		return nil
	}
	firsts := make([]any, len(probe))
	for i, c := range probe {
		firsts[i] = c.Key[0]
	}
	flt := firstKeyFilter(firstCol, firsts)
	ro := delta.ReadOptions{Columns: cols, RowGroupFilter: flt, OnlyValues: flt != nil}
	md := snap.Metadata()
	type fileHit struct {
		s   *S
		row []any
		pos int64
	}
	hits := make([][]fileHit, len(files))
	kj := newKeyJoin(probe)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range files {
		g.Go(func() error {
			key := make([]any, len(keyIdx))
			var buf []byte
			cur := kj.cursor()
			return delta.ReadFileAt(gctx, snap.Store(), md, f, ro, func(pos int64, row []any) error {
				var s *S
				var ok bool
				if j, handled := cur.find(row[keyIdx[0]]); handled {
					if j < 0 {
						return nil
					}
					s, ok = found[probe[j].Text()]
				} else {
					for k, c := range keyIdx {
						key[k] = row[c]
					}
					buf = AppendKeyText(buf[:0], key)
					s, ok = found[string(buf)]
				}
				if ok && (keep == nil || keep(s, row)) {
					hits[i] = append(hits[i], fileHit{s, slices.Clone(row), pos})
				}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, f := range files {
		for _, h := range hits[i] {
			if err := hit(h.s, h.row, f.Path, h.pos); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeRows writes rows as new data (dataChange=true) rolled at target.
// newRolling is a rolling writer of new data (dataChange=true).
func newRolling(ctx context.Context, store objstore.Store, opts delta.WriteOptions, target int64) *delta.RollingWriter {
	opts.DataChange = true
	return delta.NewRollingWriter(ctx, store, opts, target)
}

func writeRows(ctx context.Context, store objstore.Store, wo delta.WriteOptions, rows [][]any, target int64) ([]delta.Add, error) {
	w := newRolling(ctx, store, wo, target)
	for _, row := range rows {
		if err := w.Write(row); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w.Close()
}
