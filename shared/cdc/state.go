package cdc

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// StatePageBytes is the page size of state and tombstone files
// (delta.WriteOptions.PageBytes). A merge's lookup reads the pages of the
// key column whose bounds can hold a batch key, then the order column's
// pages of the matched rows: 8 KiB pages (about 200 UUID keys, 1 000
// integer keys) cut its CPU several-fold against parquet-go's 256 KiB.
// Measured: files 1-2% larger with UUID keys, 7% with the bench's state
// table (integer keys), full scans as fast. parquet-go has no per-column
// page size.
const StatePageBytes = 8 << 10

// stateStep is one step's view of a table's state and tombstone tables:
// their snapshots as the step found them, the schemas the step writes, and
// whether each already holds the step.
type stateStep struct {
	t    TableSet
	step Step
	b    Batch
	opts Options

	stateSnap, tombSnap *delta.Snapshot
	tombSchema          value.StructType
	// stateMD is the state table's new metadata (nil: unchanged): a new
	// schema, or statistics columns (statscols.go),
	// stateSource its source schema after the step, and stateWidened tells
	// that its existing rows must be rewritten with converted values.
	stateMD             *delta.Metadata
	stateSource         value.StructType
	stateWidened        bool
	stateDone, tombDone bool

	// schema is the state table's schema for a source schema, by mode.
	schema func(value.StructType) value.StructType

	keyNames []string
	keyTypes []value.Type
	// candidates are the state files whose key bounds can hold a step key:
	// the files the step reads, which a concurrent removal conflicts with.
	candidates []delta.Add
	// known receives what the lookup found of the step's keys, for the
	// history's duplicate check (dedup.go); nil: nobody waits.
	known *knownChannel
}

// openState opens (or creates) the state and tombstone tables for a step
// and evolves the state's schema to the history's.
func openState(ctx context.Context, t TableSet, step Step, b Batch, source value.StructType, order []byte, opts Options) (*stateStep, error) {
	keyIdx, err := KeyIndexes(source, b.Key)
	if err != nil {
		return nil, err
	}
	st := &stateStep{t: t, step: step, b: b, opts: opts, schema: stateSchemaOf(opts.Mode)}
	if st.tombSchema, err = TombstoneSchema(source, b.Key); err != nil {
		return nil, err
	}
	stateConf := map[string]string{PropKey: strings.Join(b.Key, ","), PropMode: string(opts.Mode)}
	if opts.DeletionVectors {
		stateConf[delta.PropEnableDeletionVectors] = "true"
	}
	if opts.Overwrite {
		stateConf = withSchemaOrder(stateConf, order)
	}
	co := delta.CreateOptions{
		Schema: st.schema(source), Name: t.ID, Configuration: stateConf, PartitionColumns: opts.StatePartitionColumns,
		Description: "dsdelta current state of " + t.ID + ": one row per primary key",
	}
	need := statsNeeds(roleState, b.Key, opts.Mode)
	if err := createWithStats(&co, need); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	// The two tables are opened (a new table's, created) at once: each is
	// a read of its log and, the first time, the write of its version 0,
	// which a new table's first file otherwise waited for in turn. Of a
	// state table built in another mode, refused below, the tombstones
	// may thus be opened, or created empty, for nothing.
	var g errgroup.Group
	g.Go(func() error {
		var err error
		if st.stateSnap, err = openOrCreate(ctx, t.Snapshots, t.State, t.ID, roleState, co); err != nil {
			return fmt.Errorf("state: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		var err error
		if st.tombSnap, err = openTombstones(ctx, t, st.tombSchema, b.Key); err != nil {
			return fmt.Errorf("tombstones: %w", err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := CheckMode(st.stateSnap, t.ID, opts.Mode); err != nil {
		return nil, err
	}
	st.stateMD, st.stateSource, _, st.stateWidened, err = evolve(st.stateSnap, source, order, st.schema, b.Key, opts.Overwrite)
	if err == nil {
		st.stateMD, err = metadataWithStats(st.stateSnap, st.stateMD, need)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	st.stateDone = step.applied(t.ID, st.stateSnap)
	st.tombDone = step.applied(t.ID, st.tombSnap)
	for _, k := range keyIdx {
		st.keyNames = append(st.keyNames, source.Fields[k].Name)
		st.keyTypes = append(st.keyTypes, source.Fields[k].Type)
	}
	return st, nil
}

// stateConf is the state table's properties after the step: those of
// the metadata it commits, if any. Its files are written with them.
func (st *stateStep) stateConf() map[string]string {
	if st.stateMD != nil {
		return st.stateMD.Configuration
	}
	return st.stateSnap.Configuration()
}

// latestSorted is the latest change of each key (Latest), sorted by key.
func latestSorted(changes []Change) []Change {
	if out, ok := latestOfRuns(changes); ok {
		return out
	}
	return sortByKey(changes, latestIndexes(changes))
}

// stored is what a lookup found for one key.
type stored struct {
	rowOrder  []byte
	rows      []rowAt // the state rows of the key (one, unless a bug duplicated it)
	tombOrder []byte
}

// rowAt is where a state row lies: its file and its physical position in
// it, the row index a deletion vector marks.
type rowAt struct {
	path string
	pos  int64
}

// lookup finds what the state and tombstone tables hold of the keys
// (sorted by key): reading only the key and order columns of the files,
// and row groups, whose key bounds can hold one.
// Keys no file can hold are absent from the result: planState takes them
// as stored nowhere. When no file can hold any key (a table's first load,
// or a key range of a bulk load no earlier step wrote), nothing is built.
func (st *stateStep) lookup(ctx context.Context, keys []Change) (map[string]*stored, error) {
	st.candidates = prune(st.stateSnap.Files(), st.keyNames[0], st.keyTypes[0], keys)
	tombCandidates := prune(st.tombSnap.Files(), st.keyNames[0], st.keyTypes[0], keys)
	if len(st.candidates) == 0 && len(tombCandidates) == 0 {
		return map[string]*stored{}, nil
	}
	found := make(map[string]*stored, len(keys))
	for i := range keys {
		// The step's own copies: a text rendered here serves planState.
		keys[i].KeyText = keys[i].Text()
		found[keys[i].KeyText] = &stored{}
	}
	if err := lookup(ctx, st.stateSnap, st.candidates, st.keyNames, keys, found, nil, func(s *stored, order []byte, path string, pos int64) {
		if s.rowOrder == nil || bytes.Compare(order, s.rowOrder) > 0 {
			s.rowOrder = order
		}
		s.rows = append(s.rows, rowAt{path, pos})
	}); err != nil {
		return nil, fmt.Errorf("state lookup: %w", err)
	}
	if err := lookup(ctx, st.tombSnap, tombCandidates, st.keyNames, keys, found, nil, func(s *stored, order []byte, _ string, _ int64) {
		if s.tombOrder == nil || bytes.Compare(order, s.tombOrder) > 0 {
			s.tombOrder = order
		}
	}); err != nil {
		return nil, fmt.Errorf("tombstone lookup: %w", err)
	}
	return found, nil
}

// statePlan is what a step does to each of its keys.
type statePlan struct {
	keys     []Change  // the latest change per key, sorted by key
	verdicts []Verdict // per key
	// touched are the state files holding a key whose row goes away
	// (replaced or deleted), with those rows' positions; dropKeys are
	// those keys' KeyText, and dropFirsts their first key values, sorted.
	touched    map[string]*roaring64.Bitmap
	dropKeys   map[string]bool
	dropFirsts []any
	// rows, when a mode's planner set them, are the whole new state rows
	// (in the table's schema, sorted by key) instead of the rows of keys
	// whose verdict is Insert or Replace.
	rows [][]any
	// byPosition, when a mode's planner set it, drops exactly the touched
	// rows from rewritten files, where by default every row of a dropKeys
	// key goes: scd2 replaces some versions of a key and keeps the others.
	byPosition bool

	stale, inserted, updated, deleted, buried int64
}

// planState decides each key by the ordering rule (Decide) from what the
// lookup found. It does no I/O.
func planState(keys []Change, found map[string]*stored) statePlan {
	p := statePlan{keys: keys, verdicts: make([]Verdict, len(keys)), touched: map[string]*roaring64.Bitmap{}, dropKeys: map[string]bool{}}
	nowhere := &stored{} // a key found nowhere; read, never written
	for i, c := range keys {
		var s *stored
		if len(found) > 0 { // a key's text is rendered only to look it up
			s = found[c.Text()]
		}
		if s == nil {
			s = nowhere
		}
		v := Decide(c, s.rowOrder, s.tombOrder)
		p.verdicts[i] = v
		switch v {
		case Stale:
			p.stale++
		case Insert:
			p.inserted++
		case Replace:
			p.updated++
		case Delete:
			p.deleted++
		case Bury:
			p.buried++
		}
		if v == Replace || v == Delete {
			p.dropKeys[c.Text()] = true
			p.dropFirsts = append(p.dropFirsts, c.Key[0])
			p.touch(s.rows)
		}
	}
	return p
}

// touch records that the rows leave their state files.
func (p *statePlan) touch(rows []rowAt) {
	for _, r := range rows {
		if p.touched[r.path] == nil {
			p.touched[r.path] = roaring64.New()
		}
		p.touched[r.path].Add(uint64(r.pos))
	}
}

// upserts is how many keys get a new state row.
func (p statePlan) upserts() int64 { return p.inserted + p.updated }

// commitTombstones records the plan's deletes in the tombstone table.
func (st *stateStep) commitTombstones(ctx context.Context, plan statePlan, res *Result, historyCommitted <-chan struct{}) error {
	now := st.opts.Now()
	var rows [][]any
	for i, c := range plan.keys {
		if plan.verdicts[i] != Delete && plan.verdicts[i] != Bury {
			continue
		}
		row := make([]any, 0, len(st.tombSchema.Fields))
		row = append(row, c.Key...)
		row = append(row, c.Order, c.Position, c.SourceTS, value.MicrosOf(now))
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil
	}
	t := st.t
	adds, err := writeRows(ctx, t.Tombstones, delta.WriteOptions{Schema: st.tombSnap.Schema(), Configuration: st.tombSnap.Configuration(), BloomFilterColumns: st.keyNames[:1], PageBytes: StatePageBytes}, rows, st.opts.TargetFileBytes)
	if err != nil {
		return fmt.Errorf("tombstones: %w", err)
	}
	tx := st.tombSnap.NewTransaction(delta.Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Append", "partitionBy": "[]"}})
	tx.Add(adds...)
	st.step.setTxn(tx, t.ID)
	tx.SetMetrics(map[string]string{"numFiles": strconv.Itoa(len(adds)), "numOutputRows": strconv.Itoa(len(rows)), "numOutputBytes": strconv.FormatInt(sumSize(adds), 10)})
	if err := awaitHistory(ctx, historyCommitted); err != nil {
		return err
	}
	snap, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("tombstones commit: %w", err)
	}
	res.TombstoneVersion = snap.Version()
	res.FilesAdded += len(adds)
	return nil
}

// fileAction is how the rows a step drops leave one state file.
type fileAction uint8

const (
	// rewriteFile copies the file's other rows into new files (copy on
	// write) and removes it.
	rewriteFile fileAction = iota
	// markFile adds the rows to the file's deletion vector.
	markFile
	// removeFile removes the file: none of its rows is left.
	removeFile
)

// dvRewriteShare is the share of a file's rows deleted (by its vector and
// the step) from which a rewrite is cheaper than a vector: the rewrite
// copies at most as many rows as it saves every later read from fetching
// and dropping, and compaction would soon rewrite the file anyway.
const dvRewriteShare = 0.5

// chooseFileAction decides how the drop rows of state file f leave it, f's
// deletion vector (if any) marking others already. useDV says whether the
// step may write vectors, minBytes is Options.DVMinFileBytes. Pure.
func chooseFileAction(f delta.Add, drop uint64, useDV bool, minBytes int64) fileAction {
	if !useDV {
		return rewriteFile
	}
	var deleted int64
	if f.DeletionVector != nil {
		deleted = f.DeletionVector.Cardinality
	}
	deleted += int64(drop)
	st, err := delta.ParseStats(f.Stats)
	known := err == nil && f.Stats != "" && st.NumRecords > 0
	switch {
	case known && deleted >= st.NumRecords:
		return removeFile
	case minBytes > 0 && f.Size < minBytes:
		return rewriteFile
	case known && float64(deleted) >= dvRewriteShare*float64(st.NumRecords):
		return rewriteFile
	}
	return markFile
}

// fileActions decides, for each touched state file, how its dropped rows
// leave it. Pure.
func fileActions(files []delta.Add, touched map[string]*roaring64.Bitmap, useDV bool, minBytes int64) map[string]fileAction {
	out := make(map[string]fileAction, len(touched))
	for _, f := range files {
		if drop := touched[f.Path]; drop != nil {
			out[f.Path] = chooseFileAction(f, drop.GetCardinality(), useDV, minBytes)
		}
	}
	return out
}

// stateChanges are the file actions of a state commit.
type stateChanges struct {
	removes []delta.Remove
	adds    []delta.Add // new data files
	marked  []delta.Add // files re-added with a new deletion vector
	// removedFiles counts the files removed outright (rewritten or emptied)
	// and removedBytes their bytes; dvRemoved the old vectors that went
	// (with their file or replaced), dvUpdated the files whose vector was
	// replaced by a larger one; rowsCopied the rows rewrites kept and
	// rowsRewritten the rows they decoded (re-encoded or dropped) in files
	// that deletion vectors would have spared (not the small or mostly
	// deleted ones): row groups copied verbatim cost a byte copy, the
	// price of copy-on-write is in the decoded ones.
	removedFiles              int
	removedBytes              int64
	dvRemoved, dvUpdated      int
	rowsCopied, rowsRewritten int64
}

// commitState applies the plan's dropped rows to the state files that
// hold them (a deletion vector or a rewrite per file, see
// chooseFileAction), writes the plan's new rows and commits both.
func (st *stateStep) commitState(ctx context.Context, plan statePlan, res *Result, historyCommitted <-chan struct{}) error {
	upgrade := st.opts.DeletionVectors && !st.stateSnap.DeletionVectorsWritable()
	if plan.upserts() == 0 && len(plan.rows) == 0 && len(plan.touched) == 0 && st.stateMD == nil && !st.stateWidened {
		return nil // nothing changes: no commit (a re-run finds nothing to do either)
	}
	// A widened column rewrites every file: vectors would spare nothing.
	useDV := st.opts.DeletionVectors && !st.stateWidened
	acts := fileActions(st.stateSnap.Files(), plan.touched, useDV, st.opts.DVMinFileBytes)
	var ch stateChanges
	if err := st.rewriteTouched(ctx, plan, acts, res, &ch); err != nil {
		return err
	}
	if err := st.markTouched(ctx, plan, acts, &ch); err != nil {
		return err
	}
	res.DeletionVectors += len(ch.marked)
	adds := ch.adds
	if plan.upserts() > 0 || len(plan.rows) > 0 {
		a, err := st.writeUpserts(ctx, plan)
		if err != nil {
			return err
		}
		adds = append(adds, a...)
	}
	tx := st.stateSnap.NewTransaction(delta.Operation{Name: "MERGE", Parameters: map[string]string{
		"predicate": fmt.Sprintf(`["dsdelta latest-by-%s per key %v"]`, ColOrder, st.keyNames), "matchedPredicates": `[{"actionType":"update"},{"actionType":"delete"}]`, "notMatchedPredicates": `[{"actionType":"insert"}]`,
	}})
	for _, c := range st.candidates {
		tx.ReadFiles(c.Path)
	}
	tx.Remove(ch.removes...)
	tx.Add(adds...)
	tx.Add(ch.marked...)
	st.step.setTxn(tx, st.t.ID)
	if md := st.stateMD; md != nil || upgrade {
		if md == nil {
			m := st.stateSnap.Metadata()
			md = &m
		}
		if upgrade {
			// PROTOCOL.md "Deletion Vectors": writers may add vectors when
			// the protocol supports the feature and the property is true.
			md.Configuration = maps.Clone(md.Configuration) // the snapshot's own map
			if md.Configuration == nil {
				md.Configuration = map[string]string{}
			}
			md.Configuration[delta.PropEnableDeletionVectors] = "true"
			if p := st.stateSnap.Protocol(); !p.Supports(delta.FeatureDeletionVectors) {
				tx.SetProtocol(p.WithReaderWriterFeature(delta.FeatureDeletionVectors))
			}
		}
		tx.SetMetadata(*md)
	}
	tx.SetMetrics(map[string]string{
		"numSourceRows":                   strconv.FormatInt(res.Events, 10),
		"numTargetRowsInserted":           strconv.FormatInt(res.Inserted, 10),
		"numTargetRowsUpdated":            strconv.FormatInt(res.Updated, 10),
		"numTargetRowsDeleted":            strconv.FormatInt(res.Deleted, 10),
		"numTargetRowsCopied":             strconv.FormatInt(ch.rowsCopied, 10),
		"numTargetRowsSkippedStale":       strconv.FormatInt(res.Stale, 10),
		"numTargetFilesAdded":             strconv.Itoa(len(adds)),
		"numTargetFilesRemoved":           strconv.Itoa(ch.removedFiles),
		"numTargetBytesAdded":             strconv.FormatInt(sumSize(adds), 10),
		"numTargetBytesRemoved":           strconv.FormatInt(ch.removedBytes, 10),
		"numTargetDeletionVectorsAdded":   strconv.Itoa(len(ch.marked)),
		"numTargetDeletionVectorsRemoved": strconv.Itoa(ch.dvRemoved),
		"numTargetDeletionVectorsUpdated": strconv.Itoa(ch.dvUpdated),
	})
	if err := awaitHistory(ctx, historyCommitted); err != nil {
		return err
	}
	snap, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("state commit: %w", err)
	}
	res.StateVersion = snap.Version()
	res.FilesAdded += len(adds)
	if upgrade {
		st.opts.Logger.InfoContext(ctx, "current-state table upgraded to deletion vectors (reader version 3, writer version 7, table feature deletionVectors) as deletion_vectors: on asks; engines without deletion-vector support can no longer read it",
			"table", st.t.ID, "version", snap.Version())
	}
	if !st.opts.DeletionVectors && !st.stateWidened {
		res.RowsSpareable = ch.rowsRewritten
	}
	if st.step.Chunk == 0 && st.step.Last { // a batch of several steps is judged whole by its caller
		total, _ := st.stateSnap.NumRecords()
		RecommendDV(ctx, st.opts.Logger, st.t.ID, res.RowsSpareable, total, st.opts.RecommendDVShare)
	}
	return nil
}

// RecommendDV logs, after a copy-on-write batch that rewrote more than
// share of the state table's rows (of total before the batch) in files
// deletion vectors would have spared (Result.RowsSpareable), that they
// would. Small files do not count (they are rewritten either way), so a
// small table never hears it; nor does a widened column, which rewrites
// every row whatever the setting.
func RecommendDV(ctx context.Context, log *slog.Logger, tableID string, spareable, total int64, share float64) {
	if spareable == 0 || total <= 0 {
		return
	}
	if s := float64(spareable) / float64(total); s > share {
		log.WarnContext(ctx, "the merge rewrote a large share of the current-state table for one batch; set deletion_vectors: on for this table to mark changed rows instead of rewriting their files",
			"table", tableID, "rows_rewritten", spareable, "table_rows", total, "share", fmt.Sprintf("%.2f", s))
	}
}

// rewriteTouched copies each state file that rewriteFile applies to
// without the dropped keys' rows (every file when a column was widened,
// converting its values), streaming: memory holds a row group, not the
// file. Row groups whose first-key bounds exclude every dropped key are
// copied without being decoded. A file with a deletion vector is read
// through it, so its deleted rows stay deleted. Files none of whose rows
// is left are removed unread.
func (st *stateStep) rewriteTouched(ctx context.Context, plan statePlan, acts map[string]fileAction, res *Result, ch *stateChanges) error {
	now := st.opts.Now()
	md := st.stateSnap.Metadata()
	stateSchema := st.schema(st.stateSource)
	dropFilter := firstKeyFilter(st.keyNames[0], plan.dropFirsts)
	var keyBuf []byte
	drop := func(k []any) bool {
		keyBuf = AppendKeyText(keyBuf[:0], k)
		return plan.dropKeys[string(keyBuf)]
	}
	if plan.byPosition {
		drop = nil
	}
	var convErr error
	// Files() is sorted by path (and shared: never modify it).
	for _, f := range st.stateSnap.Files() {
		act, ok := acts[f.Path]
		if !ok && !st.stateWidened || act == markFile {
			continue
		}
		if act == rewriteFile {
			var dropRows *roaring64.Bitmap
			if plan.byPosition {
				dropRows = plan.touched[f.Path]
			}
			rw, err := delta.RewriteFile(ctx, st.t.State, md, f, delta.RewriteOptions{
				Write:           delta.WriteOptions{Schema: stateSchema, PartitionColumns: st.stateSnap.PartitionColumns(), Configuration: st.stateConf(), DataChange: true, RowGroupBytes: st.opts.RowGroupBytes, BloomFilterColumns: st.keyNames[:1], PageBytes: StatePageBytes},
				TargetFileBytes: st.opts.TargetFileBytes,
				Keys:            st.keyNames,
				Drop:            drop,
				DropRows:        dropRows,
				RowGroupFilter:  dropFilter,
				// A file written before state files had bloom filters
				// keeps its copied row groups verbatim (and no filter)
				// rather than re-encode them to build one.
				CopyWithoutBloomFilters: true,
				Conform: func(row []any) []any {
					r, err := conformFor(st.opts.Overwrite, row, st.stateSnap.Schema(), stateSchema)
					if err != nil && convErr == nil {
						convErr = err
					}
					return r
				},
			})
			if err == nil && convErr != nil {
				err = convErr
			}
			if err != nil {
				return fmt.Errorf("rewrite %s: %w", f.Path, err)
			}
			ch.adds = append(ch.adds, rw.Adds...)
			ch.rowsCopied += rw.Rows
			if drop := plan.touched[f.Path]; drop != nil && chooseFileAction(f, drop.GetCardinality(), true, st.opts.DVMinFileBytes) == markFile {
				ch.rowsRewritten += rw.Reencoded + rw.Dropped
			}
			res.FilesRewritten++
			res.RowGroupsCopied += rw.RowGroupsCopied
			res.RowGroupsDecoded += rw.RowGroupsDecoded
			res.RowsReencoded += rw.Reencoded
		}
		ch.removes = append(ch.removes, f.Remove(now.UnixMilli(), true))
		ch.removedFiles++
		ch.removedBytes += f.Size
		if f.DeletionVector != nil {
			ch.dvRemoved++
		}
	}
	return nil
}

// markTouched gives each state file that markFile applies to a deletion
// vector: its old vector (if any) with the step's dropped rows added. All
// the step's vectors go in one DV file at the table root, written before
// the commit: a crash leaves it unreferenced, for vacuum to remove. The
// commit removes each file with its old vector and adds it with the new
// one (PROTOCOL.md "Deletion Vectors"): a concurrent removal of the file
// conflicts, and the step is planned again.
func (st *stateStep) markTouched(ctx context.Context, plan statePlan, acts map[string]fileAction, ch *stateChanges) error {
	var files []delta.Add
	var vectors []*roaring64.Bitmap
	for _, f := range st.stateSnap.Files() {
		if acts[f.Path] != markFile || plan.touched[f.Path] == nil {
			continue
		}
		v := plan.touched[f.Path].Clone()
		if f.DeletionVector != nil {
			old, err := delta.ReadDeletionVector(ctx, st.t.State, *f.DeletionVector)
			if err != nil {
				return fmt.Errorf("state file %s: %w", f.Path, err)
			}
			v.Or(old)
		}
		files = append(files, f)
		vectors = append(vectors, v)
	}
	if len(files) == 0 {
		return nil
	}
	dvs, err := delta.WriteDeletionVectors(ctx, st.t.State, "", vectors)
	if err != nil {
		return err
	}
	now := st.opts.Now().UnixMilli()
	for i, f := range files {
		ch.removes = append(ch.removes, f.Remove(now, true))
		ch.marked = append(ch.marked, f.WithDeletionVector(&dvs[i]))
		if f.DeletionVector != nil {
			ch.dvRemoved++
			ch.dvUpdated++
		}
	}
	return nil
}

// writeUpserts writes the plan's new state rows in key order, streaming
// through one reused row: a step holds its changes, not a second copy.
func (st *stateStep) writeUpserts(ctx context.Context, plan statePlan) ([]delta.Add, error) {
	wo := delta.WriteOptions{Schema: st.schema(st.stateSource), PartitionColumns: st.stateSnap.PartitionColumns(), Configuration: st.stateConf(), RowGroupBytes: st.opts.RowGroupBytes, BloomFilterColumns: st.keyNames[:1], PageBytes: StatePageBytes}
	if plan.rows != nil {
		return writeRows(ctx, st.t.State, wo, plan.rows, st.opts.TargetFileBytes)
	}
	var upserts []int // into plan.keys, in key order
	for i := range plan.keys {
		if plan.verdicts[i] == Insert || plan.verdicts[i] == Replace {
			upserts = append(upserts, i)
		}
	}
	// Encoding a row takes one core; a step of many upserts (a bulk load)
	// writes key ranges of them into files of their own on all cores, so
	// each file still holds a range of keys apart from the others'.
	per := parallelUpsertRows
	if st.opts.upsertRowsPerFile > 0 {
		per = st.opts.upsertRowsPerFile
	}
	n := 1
	if len(upserts) >= 2*per {
		n = min(runtime.GOMAXPROCS(0), len(upserts)/per)
	}
	adds := make([][]delta.Add, n)
	g, gctx := errgroup.WithContext(ctx)
	for k := range n {
		lo, hi := k*len(upserts)/n, (k+1)*len(upserts)/n
		g.Go(func() error {
			var err error
			adds[k], err = st.writeUpsertRange(gctx, wo, plan, upserts[lo:hi])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err // files the other ranges wrote stay unreferenced: vacuum removes them
	}
	return slices.Concat(adds...), nil
}

// parallelUpsertRows is the fewest upserts a file of a step's state is
// written with when the step writes several at once.
const parallelUpsertRows = 32 << 10

// writeUpsertRange writes the upserts plan.keys[i] for i in idx.
func (st *stateStep) writeUpsertRange(ctx context.Context, wo delta.WriteOptions, plan statePlan, idx []int) ([]delta.Add, error) {
	w := newRolling(ctx, st.t.State, wo, st.opts.TargetFileBytes)
	var row []any
	// The metadata of every row written, boxed from slabs rather than one
	// allocation each; the rows are garbage once written.
	var micros value.Boxes[value.Micros]
	var strs value.Boxes[string]
	var orders value.Boxes[[]byte]
	same := value.Equal(st.b.Source, st.stateSource)
	for _, i := range idx {
		c := &plan.keys[i]
		if same && c.StateRow != nil {
			// The row as read, its metadata the change's.
			if err := w.Write(c.StateRow); err != nil {
				w.Abort()
				return nil, err
			}
			continue
		}
		// In overwrite mode a batch older than the table's schema is cast
		// to it: columns it lacks are null, columns gone are dropped.
		src, err := c.Row, error(nil)
		if !same {
			src, err = conformFor(st.opts.Overwrite, c.Row, st.b.Source, st.stateSource)
		}
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("key %s: %w", c.Text(), err)
		}
		var changeType any
		if c.ChangeType != "" {
			changeType = strs.Box(c.ChangeType)
		}
		row = append(append(row[:0], src...), micros.Box(c.SourceTS), changeType, strs.Box(c.Position), orders.Box(c.Order))
		if err := w.Write(row); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w.Close()
}
