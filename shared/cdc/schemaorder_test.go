package cdc

import (
	"bytes"
	"context"
	"encoding/hex"
	"math/big"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// vipSource is testSource after a source schema change: note dropped, vip
// added.
var vipSource = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long, Nullable: true},
	{Name: "region", Type: value.String, Nullable: true},
	{Name: "amount", Type: value.DecimalType{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "vip", Type: value.Boolean, Nullable: true},
}}

// vipEvent is genEvent in vipSource.
func vipEvent(n uint64, id int64, region string, del bool, amount int64, vip bool) datastream.Event {
	ev := genEvent(n, id, region, del, amount)
	ev.Schema = vipSource
	ev.Row = []any{id, region, value.Decimal{Unscaled: big.NewInt(amount), Scale: 2}, vip}
	return ev
}

// batchIn builds a batch of events all in schema source.
func batchIn(t *testing.T, source value.StructType, evs ...datastream.Event) Batch {
	t.Helper()
	b := Batch{Source: source, Key: []string{"id", "region"}}
	for _, ev := range evs {
		c, err := ChangeFromHistory(HistoryRow(ev), source, []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		b.Changes = append(b.Changes, c)
	}
	return b
}

// tableRows reads a state or history table: its snapshot, its source
// schema and each row's source columns.
func tableRows(t *testing.T, ctx context.Context, store objstore.Store) (*delta.Snapshot, value.StructType, [][]any) {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema := snap.Schema()
	src := SourceSchema(schema)
	var rows [][]any
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			r, err := Conform(row, schema, src)
			rows = append(rows, r)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return snap, src, rows
}

// rowJSON renders a row's columns as canonical JSON.
func rowJSON(t *testing.T, st value.StructType, row []any) string {
	t.Helper()
	b, err := value.AppendRowJSON(nil, st, row)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stateByKey is the state table's source columns as canonical JSON by the
// JSON of (id, region).
func stateByKey(t *testing.T, ctx context.Context, tabs TableSet) map[string]string {
	t.Helper()
	_, src, rows := tableRows(t, ctx, tabs.State)
	keySchema := value.StructType{Fields: src.Fields[:2]}
	out := map[string]string{}
	for _, r := range rows {
		k := rowJSON(t, keySchema, r[:2])
		if _, dup := out[k]; dup {
			t.Fatalf("key %s appears twice", k)
		}
		out[k] = rowJSON(t, src, r)
	}
	return out
}

func orderOf(n uint64) string { return hex.EncodeToString(genEvent(n, 0, "", false, 0).Order.Bytes) }

// checkSchemaOrder asserts the schema and recorded order of a table.
func checkSchemaOrder(t *testing.T, ctx context.Context, store objstore.Store, wantSchema string, wantOrder uint64) {
	t.Helper()
	snap, src, _ := tableRows(t, ctx, store)
	if src.String() != wantSchema {
		t.Errorf("%s: schema %s, want %s", store.URL(), src, wantSchema)
	}
	if got := snap.Configuration()[PropSchemaOrder]; got != orderOf(wantOrder) {
		t.Errorf("%s: %s = %q, want %q (order %d)", store.URL(), PropSchemaOrder, got, orderOf(wantOrder), wantOrder)
	}
}

const (
	oldSchemaText = "struct<id:long,region:string,amount:decimal(12,2),note:string>"
	vipSchemaText = "struct<id:long,region:string,amount:decimal(12,2),vip:boolean>"
)

// TestOverwriteModeFollowsTheNewestChangeNotTheNewestBatch: in schema mode
// "overwrite" a late batch of changes older than the one that set the
// table's schema does not revert it; its rows are conformed and still go
// through the per-key rule, and history keeps them.
func TestOverwriteModeFollowsTheNewestChangeNotTheNewestBatch(t *testing.T) {
	ctx := context.Background()
	opts := Options{Overwrite: true}
	tabs := memTables()
	apply := func(seq int64, b Batch) Result {
		t.Helper()
		r, err := Apply(ctx, tabs, seq, b, opts)
		if err != nil {
			t.Fatalf("batch %d: %v", seq, err)
		}
		return r
	}
	apply(1, batchIn(t, testSource, genEvent(1, 1, "eu", false, 100), genEvent(2, 2, "eu", false, 200), genEvent(3, 3, "eu", false, 300)))
	checkSchemaOrder(t, ctx, tabs.State, oldSchemaText, 3)
	// File B: the new schema, changes 20 and 21.
	apply(2, batchIn(t, vipSource, vipEvent(20, 1, "eu", false, 120, true), vipEvent(21, 4, "us", false, 400, false)))
	checkSchemaOrder(t, ctx, tabs.State, vipSchemaText, 21)
	// File A, written before B but merged after it: the old schema.
	r := apply(3, batchIn(t, testSource,
		genEvent(10, 1, "eu", false, 110), // older than B's change of key 1: stale
		genEvent(11, 2, "eu", false, 211), // newer than batch 1: applied
		genEvent(12, 5, "us", false, 500), // a new key
		genEvent(13, 3, "eu", true, 0),    // a delete
	))
	if r.Stale != 1 || r.Updated != 1 || r.Inserted != 1 || r.Deleted != 1 {
		t.Errorf("late batch counted %+v, want 1 stale, 1 updated, 1 inserted, 1 deleted", r)
	}

	t.Run("the state keeps the newer schema and its order", func(t *testing.T) {
		checkSchemaOrder(t, ctx, tabs.State, vipSchemaText, 21)
	})
	t.Run("the history keeps the newer schema and its order", func(t *testing.T) {
		checkSchemaOrder(t, ctx, tabs.History, vipSchemaText, 21)
	})
	t.Run("the late rows are applied where newer, conformed, and the new column's values survive", func(t *testing.T) {
		rows := stateByKey(t, ctx, tabs)
		want := map[string]string{
			`{"id":1,"region":"eu"}`: `{"id":1,"region":"eu","amount":"1.20","vip":true}`,
			`{"id":2,"region":"eu"}`: `{"id":2,"region":"eu","amount":"2.11","vip":null}`,
			`{"id":4,"region":"us"}`: `{"id":4,"region":"us","amount":"4.00","vip":false}`,
			`{"id":5,"region":"us"}`: `{"id":5,"region":"us","amount":"5.00","vip":null}`,
		}
		if len(rows) != len(want) {
			t.Errorf("state has %d rows, want %d: %v", len(rows), len(want), rows)
		}
		for k, w := range want {
			if rows[k] != w {
				t.Errorf("row %s = %s, want %s", k, rows[k], w)
			}
		}
	})
	t.Run("history holds every event in the table's schema", func(t *testing.T) {
		_, src, rows := tableRows(t, ctx, tabs.History)
		if len(rows) != 9 {
			t.Fatalf("history has %d rows, want 9", len(rows))
		}
		late := 0
		for _, r := range rows {
			if j := rowJSON(t, src, r); strings.Contains(j, `"amount":"2.11"`) || strings.Contains(j, `"amount":"1.10"`) {
				late++
			}
		}
		if late != 2 {
			t.Errorf("history holds %d of the late batch's upserts of keys 1 and 2, want 2", late)
		}
	})
	t.Run("the state equals the replay of history", func(t *testing.T) {
		if vr, err := Verify(ctx, tabs); err != nil || !vr.OK() {
			t.Fatalf("verify: %v %+v", err, vr)
		}
	})
	t.Run("a rebuild from history keeps the schema and its order", func(t *testing.T) {
		if vr, err := Rebuild(ctx, tabs, 0); err != nil || !vr.OK() {
			t.Fatalf("rebuild: %v %+v", err, vr)
		}
		checkSchemaOrder(t, ctx, tabs.State, vipSchemaText, 21)
		// A late batch after the rebuild still cannot revert the schema.
		if _, err := Apply(ctx, tabs, 4, batchIn(t, testSource, genEvent(14, 6, "eu", false, 600)), opts); err != nil {
			t.Fatal(err)
		}
		checkSchemaOrder(t, ctx, tabs.State, vipSchemaText, 21)
	})
}

// TestOverwriteModeChangesTheSchemaAtEveryNewerBatch: batches in source
// order replace the schema each time, back and forth.
func TestOverwriteModeChangesTheSchemaAtEveryNewerBatch(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	steps := []struct {
		name   string
		batch  Batch
		schema string
		order  uint64
	}{
		{"the first batch creates the table with its schema", batchIn(t, testSource, genEvent(1, 1, "eu", false, 100)), oldSchemaText, 1},
		{"a newer batch of a new schema replaces it", batchIn(t, vipSource, vipEvent(5, 2, "eu", false, 200, true)), vipSchemaText, 5},
		{"a newer batch of the former schema replaces it again", batchIn(t, testSource, genEvent(9, 1, "eu", false, 101)), oldSchemaText, 9},
		{"a newer batch of the same schema keeps the order that set it", batchIn(t, testSource, genEvent(12, 3, "eu", false, 300)), oldSchemaText, 9},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if _, err := Apply(ctx, tabs, int64(i+1), s.batch, Options{Overwrite: true}); err != nil {
				t.Fatal(err)
			}
			checkSchemaOrder(t, ctx, tabs.State, s.schema, s.order)
			checkSchemaOrder(t, ctx, tabs.History, s.schema, s.order)
			if vr, err := Verify(ctx, tabs); err != nil || !vr.OK() {
				t.Fatalf("verify: %v %+v", err, vr)
			}
		})
	}
}

// TestOverwriteModeCrashBetweenCommitsConverges crashes between the
// history, tombstone and state commits of the schema-changing batch and of
// the late batch after it; re-running the batch converges to the newest
// change's schema.
func TestOverwriteModeCrashBetweenCommitsConverges(t *testing.T) {
	ctx := context.Background()
	opts := Options{Overwrite: true}
	first := func(t *testing.T) Batch {
		return batchIn(t, testSource, genEvent(1, 1, "eu", false, 100), genEvent(2, 2, "eu", false, 200), genEvent(3, 3, "eu", false, 300))
	}
	newer := func(t *testing.T) Batch {
		return batchIn(t, vipSource, vipEvent(20, 1, "eu", false, 120, true), vipEvent(21, 2, "eu", true, 0, false))
	}
	late := func(t *testing.T) Batch {
		return batchIn(t, testSource, genEvent(10, 1, "eu", false, 110), genEvent(11, 3, "eu", true, 0), genEvent(12, 5, "us", false, 500))
	}
	for _, crashed := range []string{"the schema change", "the late batch"} {
		for _, after := range []string{"history", "tombstones"} {
			t.Run("a crash after the "+after+" commit of "+crashed+" converges on re-run", func(t *testing.T) {
				tabs := memTables()
				batches := []Batch{first(t), newer(t), late(t)}
				crashAt := 2
				if crashed == "the late batch" {
					crashAt = 3
				}
				for seq := 1; seq <= 3; seq++ {
					b := batches[seq-1]
					if seq == crashAt {
						partial := tabs
						partial.State = objstore.NewMemory()
						if after == "history" {
							partial.Tombstones = objstore.NewMemory()
						}
						if _, err := Apply(ctx, partial, int64(seq), b, opts); err != nil {
							t.Fatalf("batch %d before the crash: %v", seq, err)
						}
					}
					if _, err := Apply(ctx, tabs, int64(seq), b, opts); err != nil {
						t.Fatalf("batch %d: %v", seq, err)
					}
				}
				checkSchemaOrder(t, ctx, tabs.State, vipSchemaText, 21)
				checkSchemaOrder(t, ctx, tabs.History, vipSchemaText, 21)
				rows := stateByKey(t, ctx, tabs)
				want := map[string]string{
					`{"id":1,"region":"eu"}`: `{"id":1,"region":"eu","amount":"1.20","vip":true}`,
					`{"id":5,"region":"us"}`: `{"id":5,"region":"us","amount":"5.00","vip":null}`,
				}
				if len(rows) != len(want) || rows[`{"id":1,"region":"eu"}`] != want[`{"id":1,"region":"eu"}`] || rows[`{"id":5,"region":"us"}`] != want[`{"id":5,"region":"us"}`] {
					t.Errorf("state %v, want %v", rows, want)
				}
				if n := countRows(t, ctx, tabs.History); n != 8 {
					t.Errorf("history has %d rows, want 8", n)
				}
				if vr, err := Verify(ctx, tabs); err != nil || !vr.OK() {
					t.Fatalf("verify: %v %+v", err, vr)
				}
			})
		}
	}
}

// TestBatchOrderIsTheGreatestOrderOfTheBatch, also for history-only
// changes that carry their order only in the history row.
func TestBatchOrderIsTheGreatestOrderOfTheBatch(t *testing.T) {
	b := batchIn(t, testSource, genEvent(7, 1, "eu", false, 1), genEvent(30, 2, "eu", false, 1), genEvent(12, 3, "eu", false, 1))
	want := genEvent(30, 0, "", false, 0).Order.Bytes
	t.Run("changes with a key", func(t *testing.T) {
		if got := BatchOrder(b); !bytes.Equal(got, want) {
			t.Fatalf("BatchOrder = %x, want %x", got, want)
		}
	})
	t.Run("history-only changes", func(t *testing.T) {
		var h Batch
		for _, c := range b.Changes {
			h.Changes = append(h.Changes, Change{History: c.History})
		}
		if got := BatchOrder(h); !bytes.Equal(got, want) {
			t.Fatalf("BatchOrder = %x, want %x", got, want)
		}
	})
}

// TestOverwriteModeRecordsTheOrderOnATableWithoutOne: a table created
// before the property existed learns its order at the next batch, even
// when the schema does not change, so a later, older batch cannot revert
// it.
func TestOverwriteModeRecordsTheOrderOnATableWithoutOne(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	// Merge mode records no order: the table looks like an older one.
	if _, err := Apply(ctx, tabs, 1, batchIn(t, vipSource, vipEvent(20, 1, "eu", false, 120, true)), Options{}); err != nil {
		t.Fatal(err)
	}
	if snap, _, _ := tableRows(t, ctx, tabs.State); snap.Configuration()[PropSchemaOrder] != "" {
		t.Fatalf("merge mode recorded %s", PropSchemaOrder)
	}
	if _, err := Apply(ctx, tabs, 2, batchIn(t, vipSource, vipEvent(25, 2, "eu", false, 220, false)), Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	checkSchemaOrder(t, ctx, tabs.State, vipSchemaText, 25)
	if _, err := Apply(ctx, tabs, 3, batchIn(t, testSource, genEvent(10, 3, "eu", false, 300)), Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	checkSchemaOrder(t, ctx, tabs.State, vipSchemaText, 25)
}
