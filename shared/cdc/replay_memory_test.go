package cdc

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math/big"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// wideSource is a source table with a row of a few hundred bytes.
var wideSource = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long, Nullable: true},
	{Name: "email", Type: value.String, Nullable: true},
	{Name: "balance", Type: value.DecimalType{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "created_at", Type: value.Timestamp, Nullable: true},
	{Name: "notes", Type: value.String, Nullable: true},
}}

// bigTableEvent is event n of a table of keys rows: the backfill of key
// n+1 for n < keys, then changes of keys spread by a hash, one in ten a
// delete.
func bigTableEvent(n, keys int64) (datastream.Event, int64) {
	id, del, rm, ct := n+1, false, datastream.Backfill, ""
	if n >= keys {
		h := uint64(n) * 0x9e3779b97f4a7c15
		id, del, rm, ct = int64(h>>20)%keys+1, h%10 == 0, datastream.CDC, "UPDATE-INSERT"
		if del {
			ct = "DELETE"
		}
	}
	ts := value.Micros(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + n*50_000)
	op := datastream.OpUpsert
	if del {
		op = datastream.OpDelete
	}
	return datastream.Event{
		KeyNames: []string{"id"}, KeyValues: []any{id}, Op: op,
		Order:           datastream.OrderKey{Bytes: binary.BigEndian.AppendUint64([]byte{1}, uint64(n)), Text: "pos:" + strconv.FormatInt(n, 10)},
		SourceTimestamp: ts, ReadMethod: rm, ChangeType: ct, Schema: wideSource,
		Row: []any{id, "user" + strconv.FormatInt(id, 10) + "@example.com", value.Decimal{Unscaled: big.NewInt(n), Scale: 2}, ts,
			"note " + strconv.FormatInt(n, 36) + " lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore"},
		Meta: datastream.Metadata{UUID: "u" + strconv.FormatInt(n, 16), SourceTimestamp: ts, ChangeType: ct, IsDeleted: del},
	}, id
}

// writeBigTables writes the three tables of keys backfilled rows and
// changes later events directly, as merges would have left them.
func writeBigTables(t *testing.T, ctx context.Context, tabs TableSet, keys, changes int64) {
	t.Helper()
	key := []string{"id"}
	create := func(store objstore.Store, role string, co delta.CreateOptions) *delta.Snapshot {
		co.Configuration = map[string]string{PropTable: tabs.ID, PropRole: role, PropKey: "id"}
		snap, err := delta.Create(ctx, store, co)
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	commit := func(snap *delta.Snapshot, w *delta.RollingWriter) {
		adds, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		tx := snap.NewTransaction(delta.Operation{Name: "WRITE"})
		tx.Add(adds...)
		tx.SetTxn(AppID(tabs.ID), 1)
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hschema := HistorySchema(wideSource)
	hsnap := create(tabs.History, "history", delta.CreateOptions{Schema: hschema, PartitionColumns: []string{ColSourceDate}})
	hw := newRolling(ctx, tabs.History, delta.WriteOptions{Schema: hschema, PartitionColumns: []string{ColSourceDate}}, 128<<20)
	last := make([]int64, keys+1)
	for n := int64(0); n < keys+changes; n++ {
		ev, id := bigTableEvent(n, keys)
		last[id] = n
		if err := hw.Write(HistoryRow(ev)); err != nil {
			t.Fatal(err)
		}
	}
	commit(hsnap, hw)
	sschema := StateSchema(wideSource)
	tschema, _ := TombstoneSchema(wideSource, key)
	ssnap := create(tabs.State, "state", delta.CreateOptions{Schema: sschema})
	tsnap := create(tabs.Tombstones, "tombstones", delta.CreateOptions{Schema: tschema})
	sw := newRolling(ctx, tabs.State, delta.WriteOptions{Schema: sschema}, 128<<20)
	tw := newRolling(ctx, tabs.Tombstones, delta.WriteOptions{Schema: tschema}, 128<<20)
	for id := int64(1); id <= keys; id++ {
		ev, _ := bigTableEvent(last[id], keys)
		c, err := ChangeFromHistory(HistoryRow(ev), wideSource, []int{0})
		if err != nil {
			t.Fatal(err)
		}
		tail := stateTail(c)
		if c.Delete {
			err = tw.Write([]any{c.Key[0], c.Order, c.Position, c.SourceTS, c.SourceTS})
		} else {
			err = sw.Write(append(append([]any(nil), c.Row...), tail[:]...))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	commit(ssnap, sw)
	commit(tsnap, tw)
}

// heapPeak samples until stopped the live heap as of the latest garbage
// collection, and returns its high-water mark: what was retained, whatever
// the collector's pace.
func heapPeak(ctx context.Context) func() uint64 {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-ctx.Done():
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		cancel()
		runtime.GC() // count what is live at the end too
		return max(<-done, heapNow())
	}
}

// heapNow is the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestReplayMemoryIsBoundedByTheBoundsNotTheTable verifies and rebuilds a
// table of 300k keys with passes of at most 60k keys, and checks that the heap
// grows by far less than holding the table's rows would take: a
// regression to a replay held in memory fails it.
func TestReplayMemoryIsBoundedByTheBoundsNotTheTable(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and replays a 300k-row table")
	}
	ctx := context.Background()
	dir := t.TempDir()
	open := func(name string) objstore.Store {
		s, err := objstore.NewLocal(dir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tabs := TableSet{ID: "db.big", State: open("big"), History: open("big_log"), Tombstones: open("big_tombstones")}
	const keys, changes = 300_000, 30_000
	writeBigTables(t, ctx, tabs, keys, changes)
	// What holding the state table's rows takes, measured: the former
	// in-memory replay held more (a change and a history row per key).
	base := heapNow()
	var held [][]any
	_, held = stateRows(t, ctx, tabs)
	holding := heapNow() - min(base, heapNow())
	runtime.KeepAlive(held)
	held = nil
	h := &passCounter{}
	r := Replay{MaxKeys: 60_000, MaxBytes: 16 << 20, Logger: slog.New(h)}
	for _, step := range []struct {
		name string
		run  func() (VerifyResult, error)
	}{
		{"verify", func() (VerifyResult, error) { return r.Verify(ctx, tabs) }},
		{"rebuild", func() (VerifyResult, error) { return r.Rebuild(ctx, tabs) }},
	} {
		base := heapNow()
		stop := heapPeak(ctx)
		start := time.Now()
		res, err := step.run()
		peak := stop()
		grew := peak - min(base, peak)
		if err != nil || !res.OK() || res.HistoryEvents != keys+changes {
			t.Fatalf("%s: %v %+v", step.name, err, res)
		}
		if h.passes.Load() < 5 || h.maxKeys.Load() > int64(r.MaxKeys) || h.maxBytes.Load() > r.MaxBytes {
			t.Errorf("%s: %d passes of up to %d keys and %d bytes, want several within %d keys and %d bytes", step.name, h.passes.Load(), h.maxKeys.Load(), h.maxBytes.Load(), r.MaxKeys, r.MaxBytes)
		}
		h.passes.Store(0)
		t.Logf("%s of %d keys in %s: live heap grew %d MiB at most (holding the rows takes %d MiB)", step.name, keys, time.Since(start).Round(time.Millisecond), grew>>20, holding>>20)
		// A pass's keys (and a rebuild's rows, and its writers' row
		// groups) stay well under half of the table's rows.
		if grew > holding/2 {
			t.Errorf("%s: live heap grew %d MiB, over half of what holding the rows takes (%d MiB)", step.name, grew>>20, holding>>20)
		}
	}
}
