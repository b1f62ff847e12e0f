package cdc

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// wideTable is a source table of width columns c01, c02, ... whose key is
// column keyAt (counted from 1).
type wideTable struct {
	source value.StructType
	keyIdx int
}

func newWideTable(width, keyAt int) wideTable {
	var w wideTable
	for i := 1; i <= width; i++ {
		typ := value.Type(value.String)
		if i%2 == 0 || i == keyAt {
			typ = value.Long
		}
		w.source.Fields = append(w.source.Fields, value.Field{Name: fmt.Sprintf("c%02d", i), Type: typ, Nullable: true})
	}
	w.keyIdx = keyAt - 1
	return w
}

func (w wideTable) key() string { return w.source.Fields[w.keyIdx].Name }

// change is event n (its ordering key and source time) of key id.
func (w wideTable) change(t *testing.T, n uint64, id int64, del bool) Change {
	t.Helper()
	ts := value.Micros(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixMicro() + int64(n)*37_000_000)
	op, ct := datastream.OpUpsert, "UPDATE-INSERT"
	if del {
		op, ct = datastream.OpDelete, "DELETE"
	}
	row := make([]any, len(w.source.Fields))
	for i, f := range w.source.Fields {
		switch {
		case i == w.keyIdx:
			row[i] = id
		case f.Type == value.Long:
			row[i] = int64(n) * int64(i)
		default:
			row[i] = fmt.Sprintf("v%d.%d", n, i)
		}
	}
	ev := datastream.Event{
		KeyNames: []string{w.key()}, KeyValues: []any{id},
		Op: op, Order: datastream.OrderKey{Bytes: binary.BigEndian.AppendUint64([]byte{1}, n), Text: fmt.Sprintf("pos:%d", n)},
		SourceTimestamp: ts, ReadMethod: datastream.CDC, ChangeType: ct, Schema: w.source, Row: row,
		Meta: datastream.Metadata{UUID: fmt.Sprintf("u%d", n), SourceTimestamp: ts, ChangeType: ct, IsDeleted: del},
	}
	c, err := ChangeFromHistory(HistoryRow(ev), w.source, []int{w.keyIdx})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mergeReads is what one merge read of each table.
type mergeReads struct {
	filesRead                    int // Result.FilesRead: the state files pruning kept
	state, history, tombstones   int64
	stateFiles, tombstoneFilesIn int // files in the tables before the merge
}

// oneFileMerge loads four batches of keys of disjoint ranges into a table
// (four state files), then merges two updates and a delete of keys of the
// third range, and returns what that merge read.
func oneFileMerge(t *testing.T, w wideTable, mode Mode, dv bool) mergeReads {
	t.Helper()
	ctx := context.Background()
	base := memTables()
	state, hist, tomb := &fileReads{Store: base.State}, &fileReads{Store: base.History}, &fileReads{Store: base.Tombstones}
	tabs := TableSet{ID: base.ID, State: state, History: hist, Tombstones: tomb}
	opts := Options{Mode: mode, DeletionVectors: dv}
	n := uint64(0)
	batch := func(ids []int64, del map[int64]bool) Batch {
		b := Batch{Source: w.source, Key: []string{w.key()}}
		for _, id := range ids {
			n++
			b.Changes = append(b.Changes, w.change(t, n, id, del[id]))
		}
		return b
	}
	for r := range int64(4) {
		var ids []int64
		for id := r*1000 + 1; id <= r*1000+50; id++ {
			ids = append(ids, id)
		}
		// A delete in each range: a tombstone file per range as well.
		if _, err := Apply(ctx, tabs, r+1, batch(ids, map[int64]bool{r*1000 + 50: true}), opts); err != nil {
			t.Fatal(err)
		}
	}
	var out mergeReads
	for _, c := range []struct {
		store objstore.Store
		n     *int
	}{{base.State, &out.stateFiles}, {base.Tombstones, &out.tombstoneFilesIn}} {
		snap, err := delta.Open(c.store).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		*c.n = snap.NumFiles()
	}
	s0, h0, t0 := state.reads.Load(), hist.reads.Load(), tomb.reads.Load()
	res, err := Apply(ctx, tabs, 5, batch([]int64{2001, 2002, 2003}, map[int64]bool{2003: true}), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Updated == 0 || res.Updated+res.Inserted+res.Deleted < 3 {
		t.Fatalf("the merge updated %d, inserted %d and deleted %d rows", res.Updated, res.Inserted, res.Deleted)
	}
	out.filesRead = res.FilesRead
	out.state, out.history, out.tombstones = state.reads.Load()-s0, hist.reads.Load()-h0, tomb.reads.Load()-t0
	return out
}

// TestAWideTablePrunesLikeANarrowOne is issue 31's item 6: a merge into a
// 60-column table whose key is column 45 (past the 32 columns Delta gives
// statistics by default) reads the files a merge into a 4-column table
// reads, in every mode, with deletion vectors on and off.
func TestAWideTablePrunesLikeANarrowOne(t *testing.T) {
	for _, mode := range []Mode{ModeCurrent, ModeSoftDelete, ModeSCD2} {
		for _, dv := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, deletion vectors %s", mode, onOff(dv)), func(t *testing.T) {
				narrow := oneFileMerge(t, newWideTable(4, 1), mode, dv)
				wide := oneFileMerge(t, newWideTable(60, 45), mode, dv)
				if narrow.stateFiles < 4 || narrow.filesRead != 1 {
					t.Fatalf("the narrow table's merge kept %d of %d state files, want 1", narrow.filesRead, narrow.stateFiles)
				}
				if wide != narrow {
					t.Errorf("the wide table's merge read %+v, the narrow one's %+v", wide, narrow)
				}
			})
		}
	}
}

// commitHasMetadata reports whether the table's latest commit sets
// metadata.
func commitHasMetadata(t *testing.T, ctx context.Context, store objstore.Store) bool {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := objstore.ReadAll(ctx, store, fmt.Sprintf("_delta_log/%020d.json", snap.Version()))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), `{"metaData":`)
}

// setProperty commits a table property change, as a user's ALTER TABLE
// does; "" removes it.
func setProperty(t *testing.T, ctx context.Context, store objstore.Store, key, val string) {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md := snap.Metadata()
	md.Configuration = snap.Configuration()
	if val == "" {
		delete(md.Configuration, key)
	} else {
		md.Configuration[key] = val
	}
	tx := snap.NewTransaction(delta.Operation{Name: "SET TBLPROPERTIES"})
	tx.SetMetadata(md)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTheStatisticsColumnsAreSetOnceAndAUsersChoiceIsKept(t *testing.T) {
	ctx := context.Background()
	w := newWideTable(60, 45)
	n := uint64(0)
	apply := func(tabs TableSet, seq int64, id int64) {
		t.Helper()
		n++
		b := Batch{Source: w.source, Key: []string{w.key()}, Changes: []Change{w.change(t, n, id, false)}}
		if _, err := Apply(ctx, tabs, seq, b, Options{Mode: ModeSCD2}); err != nil {
			t.Fatal(err)
		}
	}
	prop := func(store objstore.Store) string {
		t.Helper()
		snap, err := delta.Open(store).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Configuration()[delta.PropDataSkippingStatsColumns]
	}
	tabs := memTables()
	apply(tabs, 1, 1)
	for _, tc := range []struct {
		name  string
		store objstore.Store
		want  []string // among the listed columns
	}{
		{"state", tabs.State, []string{"c45", ColSourceTimestamp, ColValidFrom, ColValidTo, "c01", "c32"}},
		{"history", tabs.History, []string{"c45", ColSourceTimestamp, "c19"}},
	} {
		got := strings.Split(prop(tc.store), ",")
		for _, c := range tc.want {
			if !strings.Contains(","+prop(tc.store)+",", ","+c+",") {
				t.Errorf("the new %s table lists %q for statistics, lacking %s", tc.name, got, c)
			}
		}
	}
	if p := prop(tabs.Tombstones); p != "" {
		t.Errorf("the tombstone table, whose columns are all within the first 32, lists %q", p)
	}

	t.Run("a merge into a table that has them commits no metadata", func(t *testing.T) {
		apply(tabs, 2, 2)
		if commitHasMetadata(t, ctx, tabs.State) || commitHasMetadata(t, ctx, tabs.History) {
			t.Error("a steady-state merge set metadata")
		}
	})
	t.Run("a table without them gets them in its next merge, once", func(t *testing.T) {
		for _, s := range []objstore.Store{tabs.State, tabs.History} {
			setProperty(t, ctx, s, delta.PropDataSkippingStatsColumns, "")
		}
		apply(tabs, 3, 3)
		if !commitHasMetadata(t, ctx, tabs.State) || !commitHasMetadata(t, ctx, tabs.History) || prop(tabs.State) == "" || prop(tabs.History) == "" {
			t.Fatal("the merge did not set the statistics columns")
		}
		apply(tabs, 4, 4)
		if commitHasMetadata(t, ctx, tabs.State) || commitHasMetadata(t, ctx, tabs.History) {
			t.Error("the merge after it set metadata again")
		}
	})
	t.Run("a user's list keeps its columns and gets the needed ones", func(t *testing.T) {
		setProperty(t, ctx, tabs.State, delta.PropDataSkippingStatsColumns, "c02")
		before := map[string]bool{}
		snap, err := delta.Open(tabs.State).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range snap.Files() {
			before[f.Path] = true
		}
		apply(tabs, 5, 5)
		want := strings.Join([]string{"c02", "c45", ColSourceTimestamp, ColValidFrom, ColValidTo}, ",")
		if got := prop(tabs.State); got != want {
			t.Fatalf("the state lists %q, want %q", got, want)
		}
		if snap, err = delta.Open(tabs.State).Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		for _, f := range snap.Files() {
			if before[f.Path] {
				continue
			}
			st, err := delta.ParseStats(f.Stats)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := st.NullCountOf("c01"); ok {
				t.Errorf("a file written under %q has statistics of c01: %s", want, f.Stats)
			}
			if _, ok := st.NullCountOf("c02"); !ok {
				t.Errorf("a file written under %q has no statistics of c02: %s", want, f.Stats)
			}
		}
	})
}

func TestANarrowTableKeepsTheDefaultStatistics(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []Mode{ModeCurrent, ModeSoftDelete, ModeSCD2} {
		tabs := memTables()
		b := Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{toChange(t, genEvent(1, 1, "eu", false, 1))}}
		if _, err := Apply(ctx, tabs, 1, b, Options{Mode: mode}); err != nil {
			t.Fatal(err)
		}
		for _, s := range []objstore.Store{tabs.State, tabs.History, tabs.Tombstones} {
			snap, err := delta.Open(s).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := snap.Configuration()[delta.PropDataSkippingStatsColumns]; ok {
				t.Errorf("%s: %s lists %q", mode, s.URL(), p)
			}
		}
	}
}

// TestStagedHistoryPartsHaveTheHistorysStatistics: a part the history
// takes as it is has the statistics the history's own files have.
func TestStagedHistoryPartsHaveTheHistorysStatistics(t *testing.T) {
	if conf := HistoryStatsConfiguration(testSource, []string{"id", "region"}); len(conf) != 0 {
		t.Errorf("a narrow history's parts get %v, want the default", conf)
	}
	w := newWideTable(60, 45)
	conf := HistoryStatsConfiguration(w.source, []string{w.key()})
	want, _, err := delta.StatsColumnsFor(HistorySchema(w.source), []string{ColSourceDate}, nil, statsNeeds(roleHistory, []string{w.key()}, ModeCurrent))
	if err != nil {
		t.Fatal(err)
	}
	if got := conf[delta.PropDataSkippingStatsColumns]; got != want || !strings.Contains(got, ",c45") {
		t.Errorf("a wide history's parts list %q, want %q with the key c45", got, want)
	}
}
