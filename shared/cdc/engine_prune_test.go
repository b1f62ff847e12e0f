package cdc

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
)

func TestPruneBySourceTimeKeepsTheFilesWhoseBoundsCanHoldAChange(t *testing.T) {
	at := func(sec int) value.Micros {
		return value.MicrosOf(time.Date(2026, 1, 5, 10, 0, sec, 0, time.UTC))
	}
	bounds := func(path string, lo, hi value.Micros) delta.Add {
		return delta.Add{Path: path, Stats: fmt.Sprintf(`{"numRecords":3,"minValues":{%q:%q},"maxValues":{%q:%q}}`,
			ColSourceTimestamp, lo.Time().Format("2006-01-02T15:04:05.000Z"), ColSourceTimestamp, hi.Time().Format("2006-01-02T15:04:05.000Z"))}
	}
	files := []delta.Add{
		bounds("before", at(0), at(9)),
		bounds("holds 20", at(15), at(25)),
		// Stats keep milliseconds: a change at 40.000700 lies within a
		// file whose maximum reads 40.000.
		bounds("ends at the change's millisecond", at(30), at(40)),
		bounds("between", at(21), at(39)),
		bounds("after", at(50), at(59)),
		{Path: "no stats"},
	}
	changes := []Change{{SourceTS: at(20)}, {SourceTS: at(40) + 700}, {SourceTS: at(45)}}
	var got []string
	for _, f := range pruneBySourceTime(files, changes) {
		got = append(got, f.Path)
	}
	want := []string{"holds 20", "ends at the change's millisecond", "no stats"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
}

// fileReads counts the data files opened through a store.
type fileReads struct {
	objstore.Store
	reads atomic.Int64
}

func (r *fileReads) NewReader(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if strings.HasSuffix(name, ".parquet") {
		r.reads.Add(1)
	}
	return r.Store.NewReader(ctx, name, off, n)
}

// TestKeysThatCannotExistAreInsertedWithoutReadingTheTable is the insert
// fast path: into an empty table, and for keys outside every file's key
// bounds, a batch reads no state or tombstone file and no history file.
func TestKeysThatCannotExistAreInsertedWithoutReadingTheTable(t *testing.T) {
	ctx := context.Background()
	base := memTables()
	state, hist, tomb := &fileReads{Store: base.State}, &fileReads{Store: base.History}, &fileReads{Store: base.Tombstones}
	tabs := TableSet{ID: base.ID, State: state, History: hist, Tombstones: tomb}
	batch := func(from, to int64, firstOrder uint64) Batch {
		b := Batch{Source: testSource, Key: []string{"id", "region"}}
		for id := from; id < to; id++ {
			b.Changes = append(b.Changes, toChange(t, genEvent(firstOrder+uint64(id-from), id, "eu", id%10 == 9, id)))
		}
		return b
	}
	reads := func() int64 { return state.reads.Load() + hist.reads.Load() + tomb.reads.Load() }
	for i, tc := range []struct {
		name     string
		b        Batch
		inserted int64
	}{
		{"into an empty table", batch(1, 201, 1), 180},
		{"keys above every file's bounds", batch(1000, 1200, 1000), 180},
	} {
		before := reads()
		res, err := Apply(ctx, tabs, int64(i+1), tc.b, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := reads() - before; got != 0 || res.FilesRead != 0 {
			t.Errorf("%s: read %d data files (FilesRead %d), want none", tc.name, got, res.FilesRead)
		}
		if res.Inserted != tc.inserted || res.Buried != int64(len(tc.b.Changes))-tc.inserted {
			t.Errorf("%s: inserted %d, buried %d", tc.name, res.Inserted, res.Buried)
		}
	}
	// A key inside the bounds is looked up: the path above is a fast path,
	// not a lookup that never happens.
	before := reads()
	if _, err := Apply(ctx, tabs, 3, batch(100, 101, 5000), Options{}); err != nil {
		t.Fatal(err)
	}
	if reads() == before {
		t.Error("an update of an existing key read no file")
	}
	if got := len(readState(t, ctx, base)); got != 360 {
		t.Errorf("state holds %d rows, want 360", got)
	}
}

// TestARedeliveredEventIsKeptOnceWhicheverHistoryRowGroupHoldsIt: the
// duplicate check reads only the history row groups whose source-time
// bounds can hold a batch event, and must still find an earlier delivery
// in the first, a middle and the last row group of a file, and at the
// edges of their bounds.
func TestARedeliveredEventIsKeptOnceWhicheverHistoryRowGroupHoldsIt(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	start := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).UnixMicro()
	event := func(n uint64) Change {
		ev := genEvent(n, int64(n), "eu", false, int64(n))
		// One source date, a millisecond apart: the history file of the
		// first batch has several row groups of neighbouring times.
		ev.SourceTimestamp = value.Micros(start + int64(n)*1000)
		ev.Meta.SourceTimestamp = ev.SourceTimestamp
		return toChange(t, ev)
	}
	const n = 3*historyRowGroupRows + 100
	first := Batch{Source: testSource, Key: []string{"id", "region"}}
	for i := uint64(0); i < n; i++ {
		first.Changes = append(first.Changes, event(i))
	}
	if _, err := Apply(ctx, tabs, 1, first, Options{}); err != nil {
		t.Fatal(err)
	}
	again := []uint64{0, historyRowGroupRows - 1, historyRowGroupRows, 2*historyRowGroupRows + 7, n - 1}
	second := Batch{Source: testSource, Key: []string{"id", "region"}}
	for _, i := range again {
		second.Changes = append(second.Changes, event(i))
	}
	for i := uint64(n); i < n+10; i++ {
		second.Changes = append(second.Changes, event(i))
	}
	res, err := Apply(ctx, tabs, 2, second, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redelivered != int64(len(again)) {
		t.Errorf("redelivered %d, want %d", res.Redelivered, len(again))
	}
	if got := countRows(t, ctx, tabs.History); got != n+10 {
		t.Errorf("history holds %d rows, want %d", got, n+10)
	}
}

// sameTimeEvent is event n of key id at one source timestamp, as a
// backfill file's rows carry: source-time bounds prune nothing.
func sameTimeEvent(t *testing.T, n uint64, id int64, del bool) Change {
	ev := genEvent(n, id, "eu", del, int64(n))
	ev.SourceTimestamp = value.Micros(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).UnixMicro())
	ev.Meta.SourceTimestamp = ev.SourceTimestamp
	return toChange(t, ev)
}

// TestTheDuplicateCheckReadsNoHistoryForNewKeys is issue 31's item 0: a
// backfill's batches of new keys, every event at one source timestamp,
// read no history file, however much history there is; an event the
// tables already record is still found there and kept once, in every
// mode.
func TestTheDuplicateCheckReadsNoHistoryForNewKeys(t *testing.T) {
	for _, mode := range []Mode{ModeCurrent, ModeSoftDelete, ModeSCD2} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			base := memTables()
			hist := &fileReads{Store: base.History}
			tabs := TableSet{ID: base.ID, State: base.State, History: hist, Tombstones: base.Tombstones}
			opts := Options{Mode: mode, TargetFileBytes: 1 << 14}
			n := uint64(0)
			batch := func(ids ...int64) Batch {
				b := Batch{Source: testSource, Key: []string{"id", "region"}}
				for _, id := range ids {
					n++
					b.Changes = append(b.Changes, sameTimeEvent(t, n, id, false))
				}
				return b
			}
			var batches []Batch
			for seq := int64(1); seq <= 6; seq++ {
				var ids []int64
				for i := range int64(500) {
					// Interleaved keys: every batch's key range covers the
					// earlier ones', so key bounds prune nothing either.
					ids = append(ids, i*6+seq)
				}
				b := batch(ids...)
				batches = append(batches, b)
				before := hist.reads.Load()
				res, err := Apply(ctx, tabs, seq, b, opts)
				if err != nil {
					t.Fatal(err)
				}
				if got := hist.reads.Load() - before; got != 0 || res.Redelivered != 0 {
					t.Fatalf("batch %d of new keys read %d history files (redelivered %d), want none", seq, got, res.Redelivered)
				}
			}
			// Batch 7: events of batches 2 and 5 again (a file delivered
			// twice under two names): each is the change the tables
			// record last of its key, so no read tells it is known.
			again := Batch{Source: testSource, Key: []string{"id", "region"}}
			again.Changes = append(again.Changes, batches[1].Changes[:40]...)
			again.Changes = append(again.Changes, batches[4].Changes[100:130]...)
			apply := func(seq int64, b Batch, redelivered int64, reads bool) {
				t.Helper()
				before := hist.reads.Load()
				res, err := Apply(ctx, tabs, seq, b, opts)
				if err != nil {
					t.Fatal(err)
				}
				if res.Redelivered != redelivered {
					t.Errorf("batch %d: redelivered %d, want %d", seq, res.Redelivered, redelivered)
				}
				if read := hist.reads.Load() > before; read != reads && mode != ModeSCD2 { // scd2 reads a late change's history anyway
					t.Errorf("batch %d read the history: %v, want %v", seq, read, reads)
				}
			}
			apply(7, again, 70, false)
			// Batch 8: newer changes of keys 1 and 7 (of batch 1). Batch
			// 9: batch 1's change of key 1 again, older than the tables'
			// last, and a late change of key 7 never delivered before:
			// only the history tells them apart.
			apply(8, batch(1, 7), 0, false)
			late := sameTimeEvent(t, 0, 7, false) // order 0: before every other
			apply(9, Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{batches[0].Changes[0], late}}, 1, true)
			if got, want := countRows(t, ctx, base.History), 6*500+3; got != want {
				t.Errorf("history holds %d rows, want %d", got, want)
			}
			vr, err := Replay{Mode: mode}.Verify(ctx, tabs)
			if err != nil || !vr.OK() {
				t.Fatalf("verify: %v %+v", err, vr)
			}
		})
	}
}

// TestAnEventOlderThanAnExpiredDeleteIsStillKeptOnce: tombstone expiry
// forgets a delete, so the tables no longer record that a key's older
// event was merged; its re-delivery is still found in the history.
func TestAnEventOlderThanAnExpiredDeleteIsStillKeptOnce(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("expiry recorded %v", recorded), func(t *testing.T) {
			ctx := context.Background()
			tabs := memTables()
			insert, del := toChange(t, genEvent(1, 7, "eu", false, 1)), toChange(t, genEvent(2, 7, "eu", true, 0))
			for i, c := range []Change{insert, del} {
				if _, err := Apply(ctx, tabs, int64(i+1), Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{c}}, Options{}); err != nil {
					t.Fatal(err)
				}
			}
			if !recorded {
				asOlderRelease(t, ctx, tabs.Tombstones)
			}
			// Deleted "now" by the merge's clock; expired a minute later.
			res, err := ExpireTombstones(ctx, tabs.Tombstones, ExpireOptions{Now: func() time.Time { return time.Now().Add(time.Minute) }})
			if err != nil || res.Expired != 1 {
				t.Fatalf("expire: %v, %+v; want one tombstone expired", err, res)
			}
			r, err := Apply(ctx, tabs, 3, Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{insert}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Redelivered != 1 {
				t.Errorf("redelivered %d, want 1", r.Redelivered)
			}
			if got := countRows(t, ctx, tabs.History); got != 2 {
				t.Errorf("history holds %d rows, want 2", got)
			}
		})
	}
}

// TestALateEventIsLookedForInTheHistoryPageByPage: an event older than
// what the tables record of its key (a late event, or a re-delivery) is
// looked for in the history through the page index, not by reading every
// row of every history file its bounds let through: at one source
// timestamp, with every history file spanning the key range, that read
// was the whole history (issue 31, a 100M-row backfill's late batches).
// The re-delivery is still found, and the late event still kept.
func TestALateEventIsLookedForInTheHistoryPageByPage(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	const n = 2*historyRowGroupRows + 500
	first := Batch{Source: testSource, Key: []string{"id", "region"}}
	for i := range int64(n) {
		first.Changes = append(first.Changes, sameTimeEvent(t, uint64(i+1), i, false))
	}
	if _, err := Apply(ctx, tabs, 1, first, Options{}); err != nil {
		t.Fatal(err)
	}
	// Newer changes of two keys, one in the first row group, one in the
	// last.
	newer := Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{
		sameTimeEvent(t, n+1, 5, false), sameTimeEvent(t, n+2, n-3, false)}}
	if _, err := Apply(ctx, tabs, 2, newer, Options{}); err != nil {
		t.Fatal(err)
	}
	// Batch 3: the first change of key 5 again, and a change of key n-3
	// older than any delivered (order 0): both older than the tables'.
	late := Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{
		first.Changes[5], sameTimeEvent(t, 0, n-3, false)}}
	var st parquetfile.ReadStats
	res, err := Apply(parquetfile.WithReadStats(ctx, &st), tabs, 3, late, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redelivered != 1 {
		t.Errorf("redelivered %d, want 1", res.Redelivered)
	}
	if st.Dense != 0 || st.Sparse == 0 {
		t.Errorf("the step read %d row groups whole and %d through the page index; want none whole", st.Dense, st.Sparse)
	}
	if got, want := countRows(t, ctx, tabs.History), n+3; got != want {
		t.Errorf("history holds %d rows, want %d", got, want)
	}
	vr, err := Replay{}.Verify(ctx, tabs)
	if err != nil || !vr.OK() {
		t.Fatalf("verify: %v %+v", err, vr)
	}
}

// TestReadKeyedWhereHoldsOnlyTheRowsItKeeps: the history holds every
// version of a key; a duplicate check wants a few of them, and must not
// hold the others until the read ends (a hot key may have millions).
func TestReadKeyedWhereHoldsOnlyTheRowsItKeeps(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	b := Batch{Source: testSource, Key: []string{"id", "region"}}
	for n := uint64(1); n <= 50; n++ {
		b.Changes = append(b.Changes, sameTimeEvent(t, n, 7, false))
	}
	b.Changes = append(b.Changes, sameTimeEvent(t, 51, 8, false))
	if _, err := Apply(ctx, tabs, 1, b, Options{}); err != nil {
		t.Fatal(err)
	}
	snap, err := delta.Open(tabs.History).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	probe := []Change{{Key: b.Changes[0].Key, KeyText: b.Changes[0].Text()}}
	found := map[string]*int{probe[0].KeyText: new(int)}
	wanted := string(b.Changes[20].Order)
	read := func(keep func(*int, []any) bool) (hits int, orders []string) {
		err := readKeyedWhere(ctx, snap, snap.Files(), []string{"id", "region", ColOrder}, []int{0, 1}, "id", probe, found, keep, func(_ *int, row []any, _ string, _ int64) error {
			hits++
			o, _ := row[2].([]byte)
			orders = append(orders, string(o))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return hits, orders
	}
	if all, _ := read(nil); all != 50 {
		t.Fatalf("without keep: %d rows of key 7, want its 50 versions", all)
	}
	hits, orders := read(func(_ *int, row []any) bool { o, _ := row[2].([]byte); return string(o) == wanted })
	if hits != 1 || orders[0] != wanted {
		t.Errorf("with keep: %d rows (%q), want the one wanted", hits, orders)
	}
}
