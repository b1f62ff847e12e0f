package cdc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// stateKey returns the key columns recorded on a state table.
func stateKey(snap *delta.Snapshot) ([]string, error) {
	k := snap.Configuration()[PropKey]
	if k == "" {
		return nil, fmt.Errorf("%s has no %s property: not a dsdelta current-state table", snap.Store().URL(), PropKey)
	}
	return strings.Split(k, ","), nil
}

// Mismatch is one difference found by Verify.
type Mismatch struct {
	Key    string
	Reason string // "missing", "unexpected", "differs: column x"
}

// VerifyResult summarises a verification.
type VerifyResult struct {
	HistoryEvents int64
	ExpectedRows  int
	ActualRows    int
	Mismatches    []Mismatch // at most 100 listed
	Total         int        // all mismatches
}

// OK reports whether the state table equals the replay of its history.
func (r VerifyResult) OK() bool { return r.Total == 0 }

// start opens the state and history tables of a verify or rebuild.
func (r Replay) start(ctx context.Context, t TableSet, keepRows bool) (*delta.Snapshot, *replayRun, error) {
	snap, err := delta.Open(t.State).Snapshot(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("state of %s: %w", t.ID, err)
	}
	key, err := stateKey(snap)
	if err != nil {
		return nil, nil, err
	}
	hsnap, err := delta.Open(t.History).Snapshot(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	mode := TableMode(snap)
	if keepRows && r.Mode != "" {
		mode = r.Mode // a rebuild into another mode
	}
	rr, err := newReplayRun(r, t, hsnap, key, keepRows, mode)
	return snap, rr, err
}

// maxListed is how many mismatches a VerifyResult lists.
const maxListed = 100

// Verify rebuilds the expected current state from the history table and
// compares it with the current-state table row for row, with the default
// bounds of Replay.
func Verify(ctx context.Context, t TableSet) (VerifyResult, error) {
	return Replay{}.Verify(ctx, t)
}

// Verify compares the current-state table with the replay of its history,
// pass by pass: each pass replays a range of keys, then reads the state
// rows of that range (only the files whose statistics allow one) and
// compares each with a hash of the row its history implies. The result is
// the one a comparison of the whole tables in memory gives: mismatches are
// listed in the order of the state table's files and rows, then the keys
// missing from it in the order of their text.
func (r Replay) Verify(ctx context.Context, t TableSet) (VerifyResult, error) {
	var res VerifyResult
	snap, rr, err := r.start(ctx, t, false)
	if err != nil {
		return res, err
	}
	key := rr.key
	v := &verifier{replayRun: rr, snap: snap, want: stateSchemaOf(rr.mode)(rr.source)}
	v.conformState = newConformer(snap.Schema(), v.want)
	if v.wantKey, err = KeyIndexes(v.want, key); err != nil {
		return res, err
	}
	v.first = v.want.Fields[v.wantKey[0]]
	plan, err := rr.plan(ctx, snap)
	if err != nil {
		return res, err
	}
	if plan != nil {
		res.HistoryEvents = plan.historyRows
	}
	for p := rr.newPass(plan, nil); ; p = rr.newPass(plan, p) {
		if err := rr.scanHistory(ctx, p); err != nil {
			return res, err
		}
		if p.countsAll {
			res.HistoryEvents = p.rows
		}
		expected := 0
		if rr.mode != ModeCurrent {
			if expected, err = rr.settle(p.tab); err != nil {
				return res, err
			}
		} else {
			for i := int32(0); i < int32(p.tab.len()); i++ {
				if p.tab.entry(i).flags&entDelete == 0 {
					expected++
				}
			}
		}
		res.ExpectedRows += expected
		compare := v.compare
		if rr.mode == ModeSCD2 {
			compare = v.compareVersions
		}
		actual, err := compare(ctx, p)
		if err != nil {
			return res, err
		}
		res.ActualRows += actual
		if err := v.missing(p); err != nil {
			return res, err
		}
		rr.done(ctx, p, "state_rows", actual, "mismatches", v.total)
		if p.last() {
			break
		}
	}
	if err := v.explain(ctx); err != nil {
		return res, err
	}
	res.Total = v.total
	for _, m := range v.listed {
		res.Mismatches = append(res.Mismatches, m.Mismatch)
	}
	for _, k := range v.missed {
		if len(res.Mismatches) == maxListed {
			break
		}
		res.Mismatches = append(res.Mismatches, Mismatch{Key: k, Reason: "missing: history's latest event for the key is an upsert"})
	}
	return res, nil
}

// verifier compares the state table with the passes of a replay and keeps
// the mismatches a VerifyResult lists.
type verifier struct {
	*replayRun
	snap         *delta.Snapshot
	want         value.StructType // the state schema of source in the table's mode
	conformState conformer        // state rows as stored to want
	wantKey      []int            // key columns in want
	first        value.Field
	total        int
	// listed are the state rows found wrong with the smallest positions in
	// the table; missed the smallest texts of keys missing from it.
	listed []*found
	missed []string
}

// found is a mismatching state row.
type found struct {
	Mismatch
	file int   // index in the snapshot's files
	row  int64 // index in the file
	// For a row that differs from its history: the key and the row,
	// until explain names the column.
	key []any
	got []any
}

func (f *found) before(g *found) bool {
	return f.file < g.file || f.file == g.file && f.row < g.row
}

// add counts a mismatch and keeps it if it is among the first listed.
func (v *verifier) add(f *found) {
	v.total++
	i, _ := slices.BinarySearchFunc(v.listed, f, func(a, b *found) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	if i >= maxListed {
		return
	}
	v.listed = slices.Insert(v.listed, i, f)
	if len(v.listed) > maxListed {
		v.listed[maxListed] = nil
		v.listed = v.listed[:maxListed]
	}
}

// compare reads the state rows of p's range and compares each with the
// pass's table, and returns how many rows it read.
func (v *verifier) compare(ctx context.Context, p *pass) (int, error) {
	return v.stateRows(ctx, p, func(fi int, rowNum int64, row []any, i int32, e *keyEntry) error {
		if e.flags&entSeen != 0 {
			v.add(&found{file: fi, row: rowNum, Mismatch: Mismatch{Key: v.keyText(row), Reason: "key appears more than once"}})
			return nil
		}
		e.flags |= entSeen
		if e.flags&(entAbsent|entDelete) != 0 {
			v.add(&found{file: fi, row: rowNum, Mismatch: Mismatch{Key: v.keyText(row), Reason: "unexpected: history says the key is deleted or never existed"}})
			return nil
		}
		sum, err := v.sum(row, nil)
		if err != nil {
			return err
		}
		if sum != e.sum {
			// The reason waits for explain, which finds the column.
			v.add(&found{file: fi, row: rowNum, Mismatch: Mismatch{Key: v.keyText(row)}, key: v.keyOf(row), got: row})
		}
		return nil
	})
}

// stateRows reads the state rows of p's range, conformed to the state
// schema, and calls fn with each row's position, the row and its key's
// entry in p's table (inserted with entAbsent when history has no change
// of the key); it returns how many rows it read.
func (v *verifier) stateRows(ctx context.Context, p *pass, fn func(fi int, rowNum int64, row []any, i int32, e *keyEntry) error) (int, error) {
	actual := 0
	var code []byte
	for fi, f := range v.snap.Files() {
		if !p.rng.mayHold(f, v.first.Name, v.first.Type) {
			continue
		}
		var rowNum int64 = -1
		err := delta.ReadFile(ctx, v.t.State, v.snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			rowNum++
			row, err := v.conformState.row(row)
			if err != nil {
				return err
			}
			if code, err = appendKeyCode(code[:0], row, v.wantKey); err != nil {
				return err
			}
			if !p.rng.contains(code) {
				return nil
			}
			actual++
			i, ok := p.tab.find(code)
			if !ok {
				i = p.tab.insert(code, nil, entAbsent)
			}
			return fn(fi, rowNum, row, i, p.tab.entry(i))
		})
		if err != nil {
			return actual, fmt.Errorf("state of %s: %w", v.id, err)
		}
	}
	return actual, nil
}

func (v *verifier) keyOf(row []any) []any {
	k := make([]any, len(v.wantKey))
	for i, p := range v.wantKey {
		k[i] = row[p]
	}
	return k
}

func (v *verifier) keyText(row []any) string { return KeyText(v.keyOf(row)) }

// missing counts the keys of p whose latest change is an upsert and that
// the state table lacks, keeping the smallest texts.
func (v *verifier) missing(p *pass) error {
	for i := int32(0); i < int32(p.tab.len()); i++ {
		if p.tab.entry(i).flags&(entDelete|entAbsent|entSeen) != 0 {
			continue
		}
		v.total++
		key, _, err := readCodes(nil, p.tab.keyOf(i), len(v.key))
		if err != nil {
			return err
		}
		kt := KeyText(key)
		j, _ := slices.BinarySearch(v.missed, kt)
		if j < maxListed {
			v.missed = slices.Insert(v.missed, j, kt)
			v.missed = v.missed[:min(len(v.missed), maxListed)]
		}
	}
	return nil
}

// explain names the first differing column of each listed row that differs
// from its history, reading the history once more for just those keys:
// passes keep a hash of each expected row, not the row.
func (v *verifier) explain(ctx context.Context) error {
	pending := map[string]*found{}
	var firsts []any
	var code []byte
	for _, f := range v.listed {
		if f.Reason != "" {
			continue
		}
		var err error
		if code, err = appendCodes(code[:0], f.key, codeKey); err != nil {
			return err
		}
		pending[string(code)] = f
		firsts = append(firsts, f.key[0])
	}
	if len(pending) == 0 {
		return nil
	}
	slices.SortFunc(firsts, value.Compare)
	changes := map[string][]Change{}
	n := len(historyMeta)
	keyIdx := make([]int, len(v.keyIdx))
	for i, k := range v.keyIdx {
		keyIdx[i] = n + k
	}
	ro := delta.ReadOptions{RowGroupFilter: firstKeyFilter(v.first.Name, firsts)}
	for _, f := range v.hsnap.Files() {
		err := delta.ReadFile(ctx, v.t.History, v.hsnap.Metadata(), f, ro, func(row []any) error {
			h, err := v.conform.row(row)
			if err != nil {
				return err
			}
			if code, err = appendKeyCode(code[:0], h, keyIdx); err != nil {
				return err
			}
			if pending[string(code)] == nil {
				return nil
			}
			c, err := ChangeFromHistory(h, v.source, v.keyIdx)
			if err != nil {
				return err
			}
			c.Row, c.History = slices.Clone(c.Row), nil
			changes[string(code)] = append(changes[string(code)], c)
			return nil
		})
		if err != nil {
			return fmt.Errorf("history of %s: %w", v.id, err)
		}
	}
	for k, f := range pending {
		f.Reason = "row differs from the latest event in history"
		rows := modeRows(v.mode, inOrder(changes[k]))
		if len(rows) != 1 {
			continue
		}
		exp := rows[0]
		for i := range v.want.Fields {
			if !value.EqualValues(f.got[i], exp[i]) {
				f.Reason = "column " + v.want.Fields[i].Name + " differs from the latest event in history"
				break
			}
		}
		f.key, f.got = nil, nil
	}
	return nil
}

// Rebuild recreates the current-state and tombstone tables from history
// in one commit each (removing every file, adding the replayed rows), and
// carries the batch txn versions over so exactly-once bookkeeping survives;
// then it verifies the result. It uses the default bounds of Replay.
func Rebuild(ctx context.Context, t TableSet, targetFileBytes int64) (VerifyResult, error) {
	return Replay{TargetFileBytes: targetFileBytes}.Rebuild(ctx, t)
}

// Rebuild recreates the current-state and tombstone tables from history,
// pass by pass over ranges of keys in key order: each pass replays its
// range and writes its rows sorted by key, so the tables come out clustered.
// Nothing is visible until every file is written: then one commit per table
// replaces all its files (the state first, like a merge), carrying the batch
// txn versions over so exactly-once bookkeeping survives. A rebuild that
// fails midway leaves only unreferenced files, which vacuum removes. The
// result is Verify's of the rebuilt tables.
func (r Replay) Rebuild(ctx context.Context, t TableSet) (VerifyResult, error) {
	var res VerifyResult
	snap, rr, err := r.start(ctx, t, true)
	if err != nil {
		return res, err
	}
	key, hsnap := rr.key, rr.hsnap
	now := rr.Now()
	tombSchema, err := TombstoneSchema(rr.source, key)
	if err != nil {
		return res, err
	}
	tsnap, err := openTombstones(ctx, t, tombSchema, key)
	if err != nil {
		return res, err
	}
	stateSchema := stateSchemaOf(rr.mode)(rr.source)
	stateMD, err := rebuiltStateMetadata(snap, hsnap, stateSchema, key, rr.mode)
	if err != nil {
		return res, err
	}
	stateW := newRolling(ctx, t.State, delta.WriteOptions{Schema: stateSchema, PartitionColumns: snap.PartitionColumns(), Configuration: stateMD.Configuration}, rr.TargetFileBytes)
	tombW := newRolling(ctx, t.Tombstones, delta.WriteOptions{Schema: tombSchema, PartitionColumns: tsnap.PartitionColumns(), Configuration: tsnap.Configuration()}, rr.TargetFileBytes)
	abort := func(err error) (VerifyResult, error) {
		stateW.Abort()
		tombW.Abort()
		return res, err
	}
	plan, err := rr.plan(ctx, nil)
	if err != nil {
		return abort(err)
	}
	var rows, tombs int
	deletedAt := value.MicrosOf(now)
	for p := rr.newPass(plan, nil); ; p = rr.newPass(plan, p) {
		if err := rr.scanHistory(ctx, p); err != nil {
			return abort(err)
		}
		for _, i := range p.tab.sortedEntries() {
			if rr.mode != ModeCurrent {
				n, nt, err := rr.writeModeRows(p.tab, i, stateW, tombW, deletedAt)
				if err != nil {
					return abort(fmt.Errorf("rebuild %s: %w", t.ID, err))
				}
				rows, tombs = rows+n, tombs+nt
				continue
			}
			if p.tab.entry(i).flags&entDelete != 0 {
				row, _, err := readCodes(make([]any, 0, len(tombSchema.Fields)), p.tab.rows[i], len(key)+3)
				if err == nil {
					err = tombW.Write(append(row, deletedAt))
				}
				if err != nil {
					return abort(fmt.Errorf("rebuild tombstones of %s: %w", t.ID, err))
				}
				tombs++
				continue
			}
			row, _, err := readCodes(nil, p.tab.rows[i], len(stateSchema.Fields))
			if err == nil {
				err = stateW.Write(row)
			}
			if err != nil {
				return abort(fmt.Errorf("rebuild state of %s: %w", t.ID, err))
			}
			rows++
		}
		rr.done(ctx, p)
		if p.last() {
			break
		}
	}
	stateAdds, err := stateW.Close()
	if err != nil {
		return abort(fmt.Errorf("rebuild state of %s: %w", t.ID, err))
	}
	tombAdds, err := tombW.Close()
	if err != nil {
		return abort(fmt.Errorf("rebuild tombstones of %s: %w", t.ID, err))
	}
	seq, _ := hsnap.TxnVersion(AppID(t.ID))
	if err := replaceFiles(ctx, snap, stateMD, stateSchema, stateAdds, rows, AppID(t.ID), seq, now); err != nil {
		return res, fmt.Errorf("rebuild state of %s: %w", t.ID, err)
	}
	if err := replaceFiles(ctx, tsnap, tsnap.Metadata(), tombSchema, tombAdds, tombs, AppID(t.ID), seq, now); err != nil {
		return res, fmt.Errorf("rebuild tombstones of %s: %w", t.ID, err)
	}
	return r.Verify(ctx, t)
}

// rebuiltStateMetadata is the metadata a rebuild in mode commits to the
// state table snap, whose rows it replays from the history hsnap.
func rebuiltStateMetadata(snap, hsnap *delta.Snapshot, stateSchema value.StructType, key []string, mode Mode) (delta.Metadata, error) {
	md := snap.Metadata()
	md.Configuration = maps.Clone(md.Configuration)
	if md.Configuration == nil {
		md.Configuration = map[string]string{}
	}
	if o, ok := hsnap.Configuration()[PropSchemaOrder]; ok {
		// The state takes the history's schema, so the order of the
		// change that set it too (schema mode "overwrite").
		md.Configuration[PropSchemaOrder] = o
	}
	md.Configuration[PropMode] = string(mode)
	// The mode's columns are new to a table rebuilt in another mode.
	conf, _, err := withStatsColumns(stateSchema, md.PartitionColumns, md.Configuration, statsNeeds(roleState, key, mode))
	md.Configuration = conf
	return md, err
}

// replaceFiles commits adds as the whole content of a table, with schema
// and md, recording the batch txn seq when there is one.
func replaceFiles(ctx context.Context, snap *delta.Snapshot, md delta.Metadata, schema value.StructType, adds []delta.Add, rows int, appID string, seq int64, now time.Time) error {
	md.SchemaString = schema.SchemaString()
	tx := snap.NewTransaction(delta.Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Overwrite", "partitionBy": "[]"}})
	tx.ReadWholeTable()
	for _, f := range snap.Files() {
		tx.Remove(f.Remove(now.UnixMilli(), true))
	}
	tx.Add(adds...)
	tx.SetMetadata(md)
	if seq > 0 {
		tx.SetTxn(appID, seq)
	}
	tx.SetMetrics(map[string]string{"numFiles": strconv.Itoa(len(adds)), "numOutputRows": strconv.Itoa(rows)})
	_, err := tx.Commit(ctx)
	return err
}
