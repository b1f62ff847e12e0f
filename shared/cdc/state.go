package cdc

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

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
	// stateMD is the state table's new metadata (nil: unchanged),
	// stateSource its source schema after the step, and stateWidened tells
	// that its existing rows must be rewritten with converted values.
	stateMD             *delta.Metadata
	stateSource         value.StructType
	stateWidened        bool
	stateDone, tombDone bool

	keyNames []string
	keyTypes []value.Type
	// candidates are the state files whose key bounds can hold a step key:
	// the files the step reads, which a concurrent removal conflicts with.
	candidates []delta.Add
}

// openState opens (or creates) the state and tombstone tables for a step
// and evolves the state's schema to the history's.
func openState(ctx context.Context, t TableSet, step Step, b Batch, source value.StructType, order []byte, opts Options) (*stateStep, error) {
	keyIdx, err := KeyIndexes(source, b.Key)
	if err != nil {
		return nil, err
	}
	st := &stateStep{t: t, step: step, b: b, opts: opts}
	if st.tombSchema, err = TombstoneSchema(source, b.Key); err != nil {
		return nil, err
	}
	stateConf := map[string]string{PropKey: strings.Join(b.Key, ",")}
	if opts.Overwrite {
		stateConf = withSchemaOrder(stateConf, order)
	}
	st.stateSnap, err = openOrCreate(ctx, t.State, t.ID, "state", delta.CreateOptions{
		Schema: StateSchema(source), Name: t.ID, Configuration: stateConf, PartitionColumns: opts.StatePartitionColumns,
		Description: "dsdelta current state of " + t.ID + ": one row per primary key",
	})
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if st.tombSnap, err = openTombstones(ctx, t, st.tombSchema, b.Key); err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	st.stateMD, st.stateSource, _, st.stateWidened, err = evolve(st.stateSnap, source, order, StateSchema, b.Key, opts.Overwrite)
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

// latestSorted is the latest change of each key (Latest), sorted by key.
func latestSorted(changes []Change) []Change {
	return sortByKey(changes, latestIndexes(changes))
}

// stored is what a lookup found for one key.
type stored struct {
	rowOrder  []byte
	rowFiles  []string // paths of files holding the key (one, unless a bug duplicated it)
	tombOrder []byte
}

// lookup finds what the state and tombstone tables hold of the keys
// (sorted by key): reading only the key and order columns of the files,
// and row groups, whose key bounds can hold one.
func (st *stateStep) lookup(ctx context.Context, keys []Change) (map[string]*stored, error) {
	found := make(map[string]*stored, len(keys))
	for _, c := range keys {
		found[c.KeyText] = &stored{}
	}
	st.candidates = prune(st.stateSnap.Files(), st.keyNames[0], st.keyTypes[0], keys)
	if err := lookup(ctx, st.stateSnap, st.candidates, st.keyNames, keys, found, func(s *stored, order []byte, path string) {
		if s.rowOrder == nil || bytes.Compare(order, s.rowOrder) > 0 {
			s.rowOrder = order
		}
		s.rowFiles = append(s.rowFiles, path)
	}); err != nil {
		return nil, fmt.Errorf("state lookup: %w", err)
	}
	tombCandidates := prune(st.tombSnap.Files(), st.keyNames[0], st.keyTypes[0], keys)
	if err := lookup(ctx, st.tombSnap, tombCandidates, st.keyNames, keys, found, func(s *stored, order []byte, _ string) {
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
	// (replaced or deleted), dropKeys those keys' KeyText, and dropFirsts
	// their first key values, sorted.
	touched    map[string]bool
	dropKeys   map[string]bool
	dropFirsts []any

	stale, inserted, updated, deleted, buried int64
}

// planState decides each key by the ordering rule (Decide) from what the
// lookup found. It does no I/O.
func planState(keys []Change, found map[string]*stored) statePlan {
	p := statePlan{keys: keys, verdicts: make([]Verdict, len(keys)), touched: map[string]bool{}, dropKeys: map[string]bool{}}
	for i, c := range keys {
		s := found[c.KeyText]
		if s == nil {
			s = &stored{}
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
			p.dropKeys[c.KeyText] = true
			p.dropFirsts = append(p.dropFirsts, c.Key[0])
			for _, path := range s.rowFiles {
				p.touched[path] = true
			}
		}
	}
	return p
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
	adds, err := writeRows(ctx, t.Tombstones, delta.WriteOptions{Schema: st.tombSnap.Schema()}, rows, st.opts.TargetFileBytes)
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

// commitState rewrites the state files that hold a dropped key (copy on
// write), writes the plan's new rows and commits both.
func (st *stateStep) commitState(ctx context.Context, plan statePlan, res *Result, historyCommitted <-chan struct{}) error {
	if plan.upserts() == 0 && len(plan.touched) == 0 && st.stateMD == nil && !st.stateWidened {
		return nil // nothing changes: no commit (a re-run finds nothing to do either)
	}
	removes, adds, err := st.rewriteTouched(ctx, plan, res)
	if err != nil {
		return err
	}
	if plan.upserts() > 0 {
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
	tx.Remove(removes...)
	tx.Add(adds...)
	st.step.setTxn(tx, st.t.ID)
	if st.stateMD != nil {
		tx.SetMetadata(*st.stateMD)
	}
	tx.SetMetrics(map[string]string{
		"numSourceRows":             strconv.FormatInt(res.Events, 10),
		"numTargetRowsInserted":     strconv.FormatInt(res.Inserted, 10),
		"numTargetRowsUpdated":      strconv.FormatInt(res.Updated, 10),
		"numTargetRowsDeleted":      strconv.FormatInt(res.Deleted, 10),
		"numTargetRowsSkippedStale": strconv.FormatInt(res.Stale, 10),
		"numTargetFilesAdded":       strconv.Itoa(len(adds)),
		"numTargetFilesRemoved":     strconv.Itoa(len(removes)),
		"numTargetBytesAdded":       strconv.FormatInt(sumSize(adds), 10),
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
	return nil
}

// rewriteTouched copies each state file that holds a dropped key without
// those keys' rows (every file when a column was widened, converting its
// values), streaming: memory holds a row group, not the file. Row groups
// whose first-key bounds exclude every dropped key are copied without
// being decoded.
func (st *stateStep) rewriteTouched(ctx context.Context, plan statePlan, res *Result) ([]delta.Remove, []delta.Add, error) {
	var removes []delta.Remove
	var adds []delta.Add
	now := st.opts.Now()
	md := st.stateSnap.Metadata()
	stateSchema := StateSchema(st.stateSource)
	dropFilter := firstKeyFilter(st.keyNames[0], plan.dropFirsts)
	var keyBuf []byte
	var convErr error
	// Files() is sorted by path (and shared: never modify it).
	for _, f := range st.stateSnap.Files() {
		if !plan.touched[f.Path] && !st.stateWidened {
			continue
		}
		rw, err := delta.RewriteFile(ctx, st.t.State, md, f, delta.RewriteOptions{
			Write:           delta.WriteOptions{Schema: stateSchema, PartitionColumns: st.stateSnap.PartitionColumns(), DataChange: true, RowGroupBytes: st.opts.RowGroupBytes},
			TargetFileBytes: st.opts.TargetFileBytes,
			Keys:            st.keyNames,
			Drop: func(k []any) bool {
				keyBuf = AppendKeyText(keyBuf[:0], k)
				return plan.dropKeys[string(keyBuf)]
			},
			RowGroupFilter: dropFilter,
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
			return nil, nil, fmt.Errorf("rewrite %s: %w", f.Path, err)
		}
		adds = append(adds, rw.Adds...)
		removes = append(removes, f.Remove(now.UnixMilli(), true))
		res.FilesRewritten++
		res.RowGroupsCopied += rw.RowGroupsCopied
		res.RowGroupsDecoded += rw.RowGroupsDecoded
		res.RowsReencoded += rw.Reencoded
	}
	return removes, adds, nil
}

// writeUpserts writes the plan's new state rows in key order, streaming
// through one reused row: a step holds its changes, not a second copy.
func (st *stateStep) writeUpserts(ctx context.Context, plan statePlan) ([]delta.Add, error) {
	w := newRolling(ctx, st.t.State, delta.WriteOptions{Schema: StateSchema(st.stateSource), PartitionColumns: st.stateSnap.PartitionColumns(), RowGroupBytes: st.opts.RowGroupBytes}, st.opts.TargetFileBytes)
	var row []any
	same := value.Equal(st.b.Source, st.stateSource)
	for i, c := range plan.keys {
		if plan.verdicts[i] != Insert && plan.verdicts[i] != Replace {
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
			return nil, fmt.Errorf("key %s: %w", c.KeyText, err)
		}
		row = append(append(row[:0], src...), c.SourceTS, nullIfEmpty(c.ChangeType), c.Position, c.Order)
		if err := w.Write(row); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w.Close()
}
