package cdc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// softRef is what the reference model holds of a key in mode soft_delete.
type softRef struct {
	up        datastream.Event // the last upsert
	deleted   bool
	deletedAt value.Micros
}

// softReference replays events sorted by ordering key, one at a time, the
// plain way the contract states mode soft_delete: an upsert sets the row
// and makes the key live, a delete marks an existing row deleted, a delete
// of a key without a row leaves none.
func softReference(events []datastream.Event) map[string]softRef {
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b datastream.Event) int { return a.Order.Compare(b.Order) })
	model := map[string]softRef{}
	for _, ev := range sorted {
		k := KeyText(ev.KeyValues)
		r, ok := model[k]
		switch {
		case ev.Op != datastream.OpDelete:
			model[k] = softRef{up: ev}
		case ok:
			r.deleted, r.deletedAt = true, ev.SourceTimestamp
			model[k] = r
		}
	}
	return model
}

// readSoft returns a soft_delete table as key text → row in
// SoftDeleteSchema(source).
func readSoft(t *testing.T, ctx context.Context, tabs TableSet, source value.StructType) map[string][]any {
	t.Helper()
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := TableMode(snap); m != ModeSoftDelete {
		t.Fatalf("table mode %s, want soft_delete", m)
	}
	out := map[string][]any{}
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			r, err := Conform(row, snap.Schema(), SoftDeleteSchema(source))
			if err != nil {
				return err
			}
			k := KeyText([]any{r[0], r[1]})
			if _, dup := out[k]; dup {
				t.Fatalf("key %s appears twice", k)
			}
			out[k] = r
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkSoft compares a soft_delete table with the reference model of
// events, column by column, and runs Verify.
func checkSoft(t *testing.T, ctx context.Context, tabs TableSet, events []datastream.Event) {
	t.Helper()
	got := readSoft(t, ctx, tabs, testSource)
	model := softReference(events)
	n := len(testSource.Fields)
	for k, ref := range model {
		row, ok := got[k]
		if !ok {
			t.Fatalf("key %s: no row, the model has %+v", k, ref)
		}
		if !value.EqualValues(row[2], ref.up.Row[2]) || row[3] != ref.up.Row[3] || string(row[n+3].([]byte)) != string(ref.up.Order.Bytes) {
			t.Fatalf("key %s: row %v, want the values of upsert %s", k, row, ref.up.Order.Text)
		}
		if row[n+4] != ref.deleted {
			t.Fatalf("key %s: _ds_is_deleted %v, want %v", k, row[n+4], ref.deleted)
		}
		var wantAt any
		if ref.deleted {
			wantAt = ref.deletedAt
		}
		if row[n+5] != wantAt {
			t.Fatalf("key %s: _ds_deleted_at %v, want %v", k, row[n+5], wantAt)
		}
	}
	if len(got) != len(model) {
		t.Fatalf("table has %d rows, model %d", len(got), len(model))
	}
	vr, err := Verify(ctx, tabs)
	if err != nil || !vr.OK() {
		t.Fatalf("verify: %v %+v", err, vr)
	}
}

func softBatch(t *testing.T, evs ...datastream.Event) Batch {
	b := Batch{Source: testSource, Key: []string{"id", "region"}}
	for _, ev := range evs {
		b.Changes = append(b.Changes, toChange(t, ev))
	}
	return b
}

// TestSoftDeleteMatchesReferenceModel: random events (shuffled files,
// duplicated events and batches, random batch sizes, deletes of keys never
// upserted, re-inserts, late older upserts after deletes) applied in mode
// soft_delete equal the sorted replay of the rule; so do verify and a
// rebuild.
func TestSoftDeleteMatchesReferenceModel(t *testing.T) {
	ctx := context.Background()
	vectors := 0 // written by the seeds with deletion vectors on
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprintf("seed %d converges to the replay", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 16))
			nkeys := 3 + rng.IntN(30)
			var events []datastream.Event
			for n := uint64(1); n <= uint64(30+rng.IntN(200)); n++ {
				id := int64(rng.IntN(nkeys))
				region := []string{"eu", "us"}[rng.IntN(2)]
				events = append(events, genEvent(n, id, region, rng.IntN(3) == 0, rng.Int64N(1_000_000)))
			}
			opts := modePropertyOptions(seed, ModeSoftDelete)
			tabs := applyShuffled(t, rng, events, opts)
			checkSoft(t, ctx, tabs, events)
			vectors += vectorsOf(t, ctx, tabs, opts)
			if n := countRows(t, ctx, tabs.History); n != len(events) {
				t.Fatalf("history holds %d rows, want %d", n, len(events))
			}
			if len(opts.StatePartitionColumns) > 0 {
				snap, _ := delta.Open(tabs.State).Snapshot(ctx)
				for _, f := range snap.Files() {
					if f.PartitionValues["region"] == nil {
						t.Fatalf("file %s has no region partition value", f.Path)
					}
				}
			}
			vr, err := Replay{MaxKeys: 4}.Rebuild(ctx, tabs)
			if err != nil || !vr.OK() {
				t.Fatalf("rebuild in passes of 4 keys: %v %+v", err, vr)
			}
			checkSoft(t, ctx, tabs, events)
		})
	}
	if vectors == 0 {
		t.Error("no seed with deletion vectors on wrote one")
	}
}

// applyShuffled delivers events to new tables in random batches, shuffled,
// a fifth of them twice, and a quarter of the batches twice (a re-run must
// find the batch applied).
func applyShuffled(t *testing.T, rng *rand.Rand, events []datastream.Event, opts Options) TableSet {
	t.Helper()
	ctx := context.Background()
	delivered := slices.Clone(events)
	for _, ev := range events {
		if rng.IntN(5) == 0 {
			delivered = append(delivered, ev)
		}
	}
	rng.Shuffle(len(delivered), func(i, j int) { delivered[i], delivered[j] = delivered[j], delivered[i] })
	tabs := memTables()
	seq := int64(0)
	for i := 0; i < len(delivered); {
		end := min(i+1+rng.IntN(30), len(delivered))
		b := softBatch(t, delivered[i:end]...)
		seq++
		if _, err := Apply(ctx, tabs, seq, b, opts); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(4) == 0 {
			r, err := Apply(ctx, tabs, seq, b, opts)
			if err != nil || !r.AlreadyHistory || !r.AlreadyState {
				t.Fatalf("re-applied batch %d: %v %+v", seq, err, r)
			}
		}
		i = end
	}
	return tabs
}

// TestSoftDeleteRules walks the contract's cases one batch at a time.
func TestSoftDeleteRules(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	opts := Options{Mode: ModeSoftDelete}
	var all []datastream.Event
	apply := func(seq int64, evs ...datastream.Event) Result {
		t.Helper()
		all = append(all, evs...)
		r, err := Apply(ctx, tabs, seq, softBatch(t, evs...), opts)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	row := func(id int64) []any { return readSoft(t, ctx, tabs, testSource)[KeyText([]any{id, "eu"})] }
	n := len(testSource.Fields)

	apply(1, genEvent(10, 1, "eu", false, 100), genEvent(11, 2, "eu", false, 200))
	if r := apply(2, genEvent(20, 1, "eu", true, 0)); r.Deleted != 1 {
		t.Fatalf("delete: %+v", r)
	}
	if r := row(1); r == nil || r[n+4] != true || r[n+5] != genEvent(20, 0, "", false, 0).SourceTimestamp {
		t.Fatalf("a deleted key keeps its row, marked with its delete's source timestamp: %v", r)
	}
	// An upsert older than the delete but newer than the last upsert
	// updates the values, and the row stays deleted.
	if r := apply(3, genEvent(15, 1, "eu", false, 150)); r.Updated != 1 {
		t.Fatalf("late upsert: %+v", r)
	}
	if r := row(1); r[2].(value.Decimal).String() != "1.50" || r[n+4] != true {
		t.Fatalf("late upsert after the delete: %v", r)
	}
	// One older than the last upsert changes nothing.
	if r := apply(4, genEvent(12, 1, "eu", false, 120)); r.Stale != 1 || r.Updated != 0 {
		t.Fatalf("upsert older than the last one: %+v", r)
	}
	// A delete of a key never upserted leaves no row...
	if r := apply(5, genEvent(30, 3, "eu", true, 0)); r.Buried != 1 {
		t.Fatalf("delete of a key without a row: %+v", r)
	}
	if row(3) != nil {
		t.Fatal("a key deleted but never upserted has a row")
	}
	// ...until an older upsert arrives: then a deleted row.
	apply(6, genEvent(25, 3, "eu", false, 250))
	if r := row(3); r == nil || r[n+4] != true {
		t.Fatalf("older upsert after a delete: %v", r)
	}
	// A newer upsert after a delete makes the key live again.
	apply(7, genEvent(40, 1, "eu", false, 400))
	if r := row(1); r[n+4] != false || r[n+5] != nil || r[2].(value.Decimal).String() != "4.00" {
		t.Fatalf("re-insert after delete: %v", r)
	}
	// Deleted again, then the delete delivered again: one state.
	apply(8, genEvent(50, 1, "eu", true, 0), genEvent(50, 1, "eu", true, 0))
	if r := apply(9, genEvent(50, 1, "eu", true, 0)); r.Deleted+r.Updated+r.Inserted != 0 {
		t.Fatalf("a re-delivered delete changed the table: %+v", r)
	}
	checkSoft(t, ctx, tabs, all)
}

// TestSoftDeleteCrashBetweenCommitsConverges replays a batch after each
// prefix of its three commits landed.
func TestSoftDeleteCrashBetweenCommitsConverges(t *testing.T) {
	base := []datastream.Event{genEvent(1, 1, "eu", false, 1), genEvent(2, 2, "eu", false, 2), genEvent(3, 3, "eu", false, 3)}
	batch2 := []datastream.Event{genEvent(4, 1, "eu", true, 0), genEvent(5, 2, "eu", false, 22), genEvent(6, 4, "us", true, 0), genEvent(7, 3, "eu", true, 0), genEvent(0, 3, "eu", false, 9)}
	crashBetweenCommits(t, ModeSoftDelete, base, batch2, checkSoft)
}

// crashBetweenCommits applies base, then batch2 to the history alone and
// to the history and the tombstones (the crashes between the commits of
// a batch), re-runs batch2 on the whole set and checks the tables.
func crashBetweenCommits(t *testing.T, mode Mode, base, batch2 []datastream.Event, check func(*testing.T, context.Context, TableSet, []datastream.Event)) {
	ctx := context.Background()
	for _, crash := range []string{"after history", "after tombstones"} {
		t.Run("crash "+crash+" then re-run", func(t *testing.T) {
			tabs := memTables()
			opts := Options{Mode: mode}
			if _, err := Apply(ctx, tabs, 1, softBatch(t, base...), opts); err != nil {
				t.Fatal(err)
			}
			partial := tabs
			partial.State = memTables().State
			if crash == "after history" {
				partial.Tombstones = memTables().Tombstones
			}
			if _, err := Apply(ctx, partial, 2, softBatch(t, batch2...), opts); err != nil {
				t.Fatal(err)
			}
			r, err := Apply(ctx, tabs, 2, softBatch(t, batch2...), opts)
			if err != nil || !r.AlreadyHistory || r.AlreadyState {
				t.Fatalf("re-run: %v %+v", err, r)
			}
			check(t, ctx, tabs, append(slices.Clone(base), batch2...))
		})
	}
}

// widerSource is testSource with a column added.
var widerSource = value.StructType{Fields: append(slices.Clone(testSource.Fields), value.Field{Name: "vip", Type: value.Boolean, Nullable: true})}

// widerBatch is a batch of ev in widerSource, vip set.
func widerBatch(t *testing.T, ev datastream.Event) Batch {
	t.Helper()
	ev.Schema, ev.Row = widerSource, append(slices.Clone(ev.Row), true)
	c, err := ChangeFromHistory(HistoryRow(ev), widerSource, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return Batch{Source: widerSource, Key: []string{"id", "region"}, Changes: []Change{c}}
}

// TestSoftDeleteFollowsSchemaEvolution: a column added by a newer batch and
// a late batch in the older schema, in both schema modes; a row whose
// deleted mark changes keeps its values in the table's schema.
func TestSoftDeleteFollowsSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	wider := widerSource
	for _, overwrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("schema mode overwrite=%v", overwrite), func(t *testing.T) {
			tabs := memTables()
			opts := Options{Mode: ModeSoftDelete, Overwrite: overwrite}
			if _, err := Apply(ctx, tabs, 1, softBatch(t, genEvent(1, 1, "eu", false, 1), genEvent(2, 2, "eu", false, 2)), opts); err != nil {
				t.Fatal(err)
			}
			if _, err := Apply(ctx, tabs, 2, widerBatch(t, genEvent(10, 2, "eu", false, 20)), opts); err != nil {
				t.Fatal(err)
			}
			// A late batch in the old schema deletes key 1 (its row is
			// rewritten in the table's schema) and brings an older upsert
			// of key 2.
			if _, err := Apply(ctx, tabs, 3, softBatch(t, genEvent(5, 1, "eu", true, 0), genEvent(4, 2, "eu", false, 4)), opts); err != nil {
				t.Fatal(err)
			}
			got := readSoft(t, ctx, tabs, wider)
			n := len(wider.Fields)
			k1, k2 := got[KeyText([]any{int64(1), "eu"})], got[KeyText([]any{int64(2), "eu"})]
			if k1 == nil || k1[n+4] != true || k1[4] != nil {
				t.Fatalf("key 1: %v", k1)
			}
			if k2 == nil || k2[n+4] != false || k2[4] != true || k2[2].(value.Decimal).String() != "0.20" {
				t.Fatalf("key 2 keeps its newest upsert with the added column: %v", k2)
			}
			if vr, err := Verify(ctx, tabs); err != nil || !vr.OK() {
				t.Fatalf("verify: %v %+v", err, vr)
			}
		})
	}
}

// TestModeMismatchIsRefusedBeforeAnythingIsWritten: a table built in one
// mode refuses a batch in another, pointing to rebuild --mode, and a
// rebuild into the new mode converts it (and back).
func TestModeMismatchIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	evs := []datastream.Event{genEvent(1, 1, "eu", false, 1), genEvent(2, 2, "eu", false, 2), genEvent(3, 1, "eu", true, 0)}
	if _, err := Apply(ctx, tabs, 1, softBatch(t, evs...), Options{}); err != nil {
		t.Fatal(err)
	}
	hist := func() int64 {
		snap, err := delta.Open(tabs.History).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Version()
	}
	before := hist()
	late := genEvent(4, 2, "eu", true, 0)
	_, err := Apply(ctx, tabs, 2, softBatch(t, late), Options{Mode: ModeSoftDelete})
	if !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), "dsdelta rebuild --mode soft_delete") {
		t.Fatalf("err = %v, want ErrModeMismatch pointing to rebuild --mode", err)
	}
	if hist() != before {
		t.Fatal("the refused batch reached the history table")
	}
	vr, err := Replay{Mode: ModeSoftDelete}.Rebuild(ctx, tabs)
	if err != nil || !vr.OK() {
		t.Fatalf("rebuild --mode soft_delete: %v %+v", err, vr)
	}
	if _, err := Apply(ctx, tabs, 2, softBatch(t, late), Options{Mode: ModeSoftDelete}); err != nil {
		t.Fatal(err)
	}
	checkSoft(t, ctx, tabs, append(evs, late))
	if _, err := Apply(ctx, tabs, 3, softBatch(t, genEvent(5, 3, "eu", false, 5)), Options{}); !errors.Is(err, ErrModeMismatch) {
		t.Fatalf("a current-mode batch into the soft_delete table: %v", err)
	}
	if vr, err := (Replay{Mode: ModeCurrent}).Rebuild(ctx, tabs); err != nil || !vr.OK() || vr.ActualRows != 0 {
		t.Fatalf("rebuild --mode current: %v %+v", err, vr)
	}
	m := newModelRun(t, Options{})
	m.tabs = tabs
	for _, ev := range append(evs, late) {
		m.model[KeyText(ev.KeyValues)] = ev
	}
	m.apply(3, []datastream.Event{genEvent(5, 3, "eu", false, 5)})
	m.check()
}

// TestSoftDeleteVerifyFindsAWrongDeletedMark: verify compares the mode's
// columns, not only the values.
func TestSoftDeleteVerifyFindsAWrongDeletedMark(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	evs := []datastream.Event{genEvent(1, 1, "eu", false, 1), genEvent(2, 1, "eu", true, 0), genEvent(3, 2, "eu", false, 2)}
	if _, err := Apply(ctx, tabs, 1, softBatch(t, evs...), Options{Mode: ModeSoftDelete}); err != nil {
		t.Fatal(err)
	}
	// Drift: rewrite the table with key 1 live.
	n := len(testSource.Fields)
	var rows [][]any
	for _, r := range readSoft(t, ctx, tabs, testSource) {
		if r[0] == int64(1) {
			r[n+4], r[n+5], r[n+6] = false, nil, nil
		}
		rows = append(rows, r)
	}
	replaceStateRows(t, ctx, tabs, rows)
	vr, err := Verify(ctx, tabs)
	if err != nil || vr.Total != 1 || !strings.Contains(vr.Mismatches[0].Reason, ColIsDeleted) {
		t.Fatalf("verify: %v %+v", err, vr)
	}
	if vr, err := Rebuild(ctx, tabs, 0); err != nil || !vr.OK() {
		t.Fatalf("rebuild: %v %+v", err, vr)
	}
	checkSoft(t, ctx, tabs, evs)
}

// replaceStateRows replaces every row of the state table with rows, in a
// commit that is not a merge: drift for verify to find.
func replaceStateRows(t *testing.T, ctx context.Context, tabs TableSet, rows [][]any) {
	t.Helper()
	snap := stateSnapshot(t, ctx, tabs.State)
	adds, err := writeRows(ctx, tabs.State, delta.WriteOptions{Schema: snap.Schema()}, rows, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := replaceFiles(ctx, snap, snap.Metadata(), snap.Schema(), adds, len(rows), "", 0, snap.Timestamp()); err != nil {
		t.Fatal(err)
	}
}
