package cdc

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

var testSource = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long, Nullable: true},
	{Name: "region", Type: value.String, Nullable: true},
	{Name: "amount", Type: value.DecimalType{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "note", Type: value.String, Nullable: true},
}}

// genEvent makes an event for key (id, region) with a unique order n.
func genEvent(n uint64, id int64, region string, del bool, amount int64) datastream.Event {
	order := binary.BigEndian.AppendUint64([]byte{1}, n)
	ts := value.Micros(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixMicro() + int64(n)*37_000_000)
	op, ct := datastream.OpUpsert, "UPDATE-INSERT"
	if del {
		op, ct = datastream.OpDelete, "DELETE"
	}
	return datastream.Event{
		KeyNames: []string{"id", "region"}, KeyValues: []any{id, region},
		Op: op, Order: datastream.OrderKey{Bytes: order, Text: fmt.Sprintf("pos:%d", n)},
		SourceTimestamp: ts, ReadMethod: datastream.CDC, ChangeType: ct, Schema: testSource,
		Row:  []any{id, region, value.Decimal{Unscaled: big.NewInt(amount), Scale: 2}, fmt.Sprintf("event %d", n)},
		Meta: datastream.Metadata{UUID: fmt.Sprintf("u%d", n), SourceTimestamp: ts, ChangeType: ct, IsDeleted: del},
	}
}

func toChange(t *testing.T, ev datastream.Event) Change {
	t.Helper()
	c, err := ChangeFromHistory(HistoryRow(ev), testSource, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func memTables() TableSet {
	root := objstore.NewMemory()
	return TableSet{ID: "db.t", State: objstore.Sub(root, "db/t"), History: objstore.Sub(root, "db/t_log"), Tombstones: objstore.Sub(root, "db/t_tombstones")}
}

// readState returns the current-state table as key text → row.
func readState(t *testing.T, ctx context.Context, tabs TableSet) map[string][]any {
	t.Helper()
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]any{}
	schema := snap.Schema()
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			k := KeyText([]any{row[0], row[1]})
			if _, dup := out[k]; dup {
				t.Fatalf("key %s appears twice in the current state", k)
			}
			r, err := Conform(row, schema, StateSchema(testSource))
			if err != nil {
				t.Fatal(err)
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

func countRows(t *testing.T, ctx context.Context, store objstore.Store) int {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range snap.Files() {
		if err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{Columns: []string{ColOrder}}, func([]any) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestApplyMatchesReferenceModel is the property test of the rule per key
// (doc.go, README "What it does"):
// random events (shuffled, duplicated, with deletes and late stale events)
// applied in random batches equal a replay of everything into a map.
func TestApplyMatchesReferenceModel(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run("deletion vectors "+onOff(dv), func(t *testing.T) {
			if marked := applyMatchesReferenceModel(t, dv); dv != (marked > 0) {
				t.Fatalf("deletion vectors %s, yet %d written", onOff(dv), marked)
			}
		})
	}
}

// onOff names a deletion_vectors setting.
func onOff(dv bool) string {
	if dv {
		return "on"
	}
	return "off"
}

// applyMatchesReferenceModel runs the property test and returns how many
// deletion vectors its merges wrote.
func applyMatchesReferenceModel(t *testing.T, dv bool) (marked int) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprintf("seed %d converges to the replay", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			nkeys := 5 + rng.IntN(40)
			var events []datastream.Event
			for n := uint64(1); n <= uint64(30+rng.IntN(200)); n++ {
				id := int64(rng.IntN(nkeys))
				region := []string{"eu", "us"}[rng.IntN(2)]
				events = append(events, genEvent(n, id, region, rng.IntN(4) == 0, rng.Int64N(1_000_000)))
			}
			// Reference: per key, the event with the greatest order wins.
			model := map[string]datastream.Event{}
			for _, ev := range events {
				k := KeyText(ev.KeyValues)
				if cur, ok := model[k]; !ok || ev.Order.Compare(cur.Order) > 0 {
					model[k] = ev
				}
			}
			// Delivery: shuffled, 20% duplicated, in random batch sizes.
			delivered := append([]datastream.Event(nil), events...)
			for _, ev := range events {
				if rng.IntN(5) == 0 {
					delivered = append(delivered, ev)
				}
			}
			rng.Shuffle(len(delivered), func(i, j int) { delivered[i], delivered[j] = delivered[j], delivered[i] })
			tabs := memTables()
			// With deletion vectors, files of every size take them (the
			// test's files are tiny), but for those mostly deleted.
			opts := Options{TargetFileBytes: 1 << 12, DeletionVectors: dv, DVMinFileBytes: -1}
			if seed%2 == 0 { // half the runs use a state table partitioned by region
				opts.StatePartitionColumns = []string{"region"}
			}
			seq := int64(0)
			for i := 0; i < len(delivered); {
				n := 1 + rng.IntN(40)
				end := min(i+n, len(delivered))
				var b Batch
				b.Source, b.Key = testSource, []string{"id", "region"}
				for _, ev := range delivered[i:end] {
					b.Changes = append(b.Changes, toChange(t, ev))
				}
				seq++
				r, err := Apply(ctx, tabs, seq, b, opts)
				if err != nil {
					t.Fatal(err)
				}
				marked += r.DeletionVectors
				if rng.IntN(4) == 0 { // a duplicate delivery of the batch is a no-op
					r, err := Apply(ctx, tabs, seq, b, opts)
					if err != nil {
						t.Fatal(err)
					}
					// The history commit is recognised by its txn; a state
					// table commit either is too or had nothing to change.
					if !r.AlreadyHistory || !r.AlreadyState && r.Inserted+r.Updated+r.Deleted+r.Buried != 0 {
						t.Fatalf("re-applied batch %d changed tables again: %+v", seq, r)
					}
				}
				i = end
			}
			got := readState(t, ctx, tabs)
			want := 0
			for k, ev := range model {
				if ev.Op == datastream.OpDelete {
					if _, ok := got[k]; ok {
						t.Fatalf("deleted key %s is in the current state", k)
					}
					continue
				}
				want++
				row, ok := got[k]
				if !ok {
					t.Fatalf("key %s missing from the current state", k)
				}
				if !value.EqualValues(row[2], ev.Row[2]) || row[3] != ev.Row[3] {
					t.Fatalf("key %s: got %v, want %v", k, row, ev.Row)
				}
				if string(row[len(row)-1].([]byte)) != string(ev.Order.Bytes) {
					t.Fatalf("key %s: stored order is not the winning event's", k)
				}
			}
			if len(got) != want {
				t.Fatalf("current state has %d rows, model %d", len(got), want)
			}
			if n := countRows(t, ctx, tabs.History); n != len(events) {
				t.Fatalf("history holds %d rows, want each of the %d events once", n, len(events))
			}
			vr, err := Verify(ctx, tabs)
			if err != nil || !vr.OK() {
				t.Fatalf("verify: %v %+v", err, vr)
			}
			if snap, _ := delta.Open(tabs.State).Snapshot(ctx); len(opts.StatePartitionColumns) > 0 {
				for _, f := range snap.Files() {
					if f.PartitionValues["region"] == nil {
						t.Fatalf("file %s has no region partition value", f.Path)
					}
				}
			}
		})
	}
	return marked
}

func TestStaleEventsNeverWinOrResurrect(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	apply := func(seq int64, evs ...datastream.Event) Result {
		t.Helper()
		b := Batch{Source: testSource, Key: []string{"id", "region"}}
		for _, ev := range evs {
			b.Changes = append(b.Changes, toChange(t, ev))
		}
		r, err := Apply(ctx, tabs, seq, b, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	apply(1, genEvent(10, 1, "eu", false, 100), genEvent(11, 2, "eu", false, 200))
	r := apply(2, genEvent(20, 1, "eu", true, 0))
	if r.Deleted != 1 {
		t.Fatalf("delete not applied: %+v", r)
	}
	r = apply(3, genEvent(15, 1, "eu", false, 999), genEvent(5, 2, "eu", false, 5))
	if r.Stale != 2 || r.Inserted != 0 || r.Updated != 0 {
		t.Fatalf("late events were applied: %+v", r)
	}
	// A delete that arrives before its key's insert buries the key.
	r = apply(4, genEvent(30, 3, "us", true, 0))
	if r.Buried != 1 {
		t.Fatalf("early delete not recorded: %+v", r)
	}
	r = apply(5, genEvent(25, 3, "us", false, 1))
	if r.Stale != 1 {
		t.Fatalf("insert older than the recorded delete was applied: %+v", r)
	}
	got := readState(t, ctx, tabs)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(got) != 1 || got[KeyText([]any{int64(2), "eu"})] == nil {
		t.Fatalf("current state keys %v, want only (2, eu)", keys)
	}
	if a := got[KeyText([]any{int64(2), "eu"})][2].(value.Decimal); a.String() != "2.00" {
		t.Fatalf("row 2 amount %s, want the newer 2.00", a)
	}
}

// TestCrashBetweenCommitsConverges replays a batch after each prefix of its
// three commits has landed.
func TestCrashBetweenCommitsConverges(t *testing.T) {
	ctx := context.Background()
	base := []datastream.Event{genEvent(1, 1, "eu", false, 1), genEvent(2, 2, "eu", false, 2), genEvent(3, 3, "eu", false, 3)}
	batch2 := []datastream.Event{genEvent(4, 1, "eu", true, 0), genEvent(5, 2, "eu", false, 22), genEvent(6, 4, "us", true, 0)}
	mk := func(evs []datastream.Event) Batch {
		b := Batch{Source: testSource, Key: []string{"id", "region"}}
		for _, ev := range evs {
			b.Changes = append(b.Changes, toChange(t, ev))
		}
		return b
	}
	for _, crash := range []string{"after history", "after tombstones"} {
		t.Run("crash "+crash+" then re-run", func(t *testing.T) {
			tabs := memTables()
			if _, err := Apply(ctx, tabs, 1, mk(base), Options{}); err != nil {
				t.Fatal(err)
			}
			// Simulate the crash: apply batch 2 to a subset of the tables by
			// pointing the others at throwaway stores.
			partial := tabs
			partial.State = objstore.NewMemory()
			if crash == "after history" {
				partial.Tombstones = objstore.NewMemory()
			}
			if _, err := Apply(ctx, partial, 2, mk(batch2), Options{}); err != nil {
				t.Fatal(err)
			}
			r, err := Apply(ctx, tabs, 2, mk(batch2), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.AlreadyHistory || r.AlreadyState {
				t.Fatalf("re-run flags: %+v", r)
			}
			got := readState(t, ctx, tabs)
			if len(got) != 2 || got[KeyText([]any{int64(1), "eu"})] != nil {
				t.Fatalf("state after re-run: %v", got)
			}
			if n := countRows(t, ctx, tabs.History); n != 6 {
				t.Fatalf("history has %d rows, want 6", n)
			}
		})
	}
}

func TestSchemaEvolutionMergeMode(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	b := Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{toChange(t, genEvent(1, 1, "eu", false, 1))}}
	if _, err := Apply(ctx, tabs, 1, b, Options{}); err != nil {
		t.Fatal(err)
	}
	wider := value.StructType{Fields: append(append([]value.Field(nil), testSource.Fields...), value.Field{Name: "vip", Type: value.Boolean, Nullable: true})}
	ev := genEvent(2, 2, "eu", false, 2)
	ev.Schema, ev.Row = wider, append(ev.Row, true)
	c, err := ChangeFromHistory(HistoryRow(ev), wider, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, tabs, 2, Batch{Source: wider, Key: b.Key, Changes: []Change{c}}, Options{}); err != nil {
		t.Fatal(err)
	}
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := snap.Schema().Index("vip"); i != 4 {
		t.Fatalf("vip column at %d in %s", i, snap.Schema())
	}
	retyped := value.StructType{Fields: append([]value.Field(nil), testSource.Fields...)}
	retyped.Fields[3].Type = value.Long
	ev3 := genEvent(3, 3, "eu", false, 3)
	ev3.Schema, ev3.Row[3] = retyped, int64(7)
	c3, _ := ChangeFromHistory(HistoryRow(ev3), retyped, []int{0, 1})
	_, err = Apply(ctx, tabs, 3, Batch{Source: retyped, Key: b.Key, Changes: []Change{c3}}, Options{})
	if err == nil || !errorsIs(err, ErrSchemaConflict) {
		t.Fatalf("retyped column: err = %v, want ErrSchemaConflict", err)
	}
}

func TestPathCollisionIsRefused(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	orders := TableSet{ID: "db.orders", State: objstore.Sub(root, "db/orders"), History: objstore.Sub(root, "db/orders_log"), Tombstones: objstore.Sub(root, "db/orders_tombstones")}
	b := Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{toChange(t, genEvent(1, 1, "eu", false, 1))}}
	if _, err := Apply(ctx, orders, 1, b, Options{}); err != nil {
		t.Fatal(err)
	}
	ordersLog := TableSet{ID: "db.orders_log", State: objstore.Sub(root, "db/orders_log"), History: objstore.Sub(root, "db/orders_log_log"), Tombstones: objstore.Sub(root, "db/orders_log_tombstones")}
	_, err := Apply(ctx, ordersLog, 1, b, Options{})
	if !errorsIs(err, ErrPathCollision) {
		t.Fatalf("err = %v, want ErrPathCollision", err)
	}
}

func TestVerifyDetectsDriftAndRebuildRepairsIt(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	b := Batch{Source: testSource, Key: []string{"id", "region"}}
	for n := uint64(1); n <= 20; n++ {
		b.Changes = append(b.Changes, toChange(t, genEvent(n, int64(n%7), "eu", n%5 == 0, int64(n))))
	}
	if _, err := Apply(ctx, tabs, 1, b, Options{}); err != nil {
		t.Fatal(err)
	}
	// Drift: drop one data file of the state table behind the engine's back.
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(delta.Operation{Name: "DELETE"})
	tx.Remove(snap.Files()[0].Remove(time.Now().UnixMilli(), true))
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	vr, err := Verify(ctx, tabs)
	if err != nil {
		t.Fatal(err)
	}
	if vr.OK() || vr.Total == 0 || vr.Mismatches[0].Reason[:7] != "missing" {
		t.Fatalf("verify missed the drift: %+v", vr)
	}
	vr, err = Rebuild(ctx, tabs, 0)
	if err != nil || !vr.OK() {
		t.Fatalf("rebuild: %v %+v", err, vr)
	}
	// The rebuilt table keeps the batch txn: re-applying batch 1 is a no-op.
	r, err := Apply(ctx, tabs, 1, b, Options{})
	if err != nil || !r.AlreadyState {
		t.Fatalf("batch 1 after rebuild: %v %+v", err, r)
	}
}

// TestTwoHoldersApplyingOneBatchConverge: a stale lease holder and a new
// one apply the same batch at once; both succeed and the batch lands once.
func TestTwoHoldersApplyingOneBatchConverge(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	var b Batch
	b.Source, b.Key = testSource, []string{"id", "region"}
	for n := uint64(1); n <= 50; n++ {
		b.Changes = append(b.Changes, toChange(t, genEvent(n, int64(n%13), "eu", n%7 == 0, int64(n))))
	}
	if _, err := Apply(ctx, tabs, 1, Batch{Source: testSource, Key: b.Key, Changes: b.Changes[:5]}, Options{}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := Apply(ctx, tabs, 2, b, Options{})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a holder failed: %v", err)
		}
	}
	if n := countRows(t, ctx, tabs.History); n != 50 {
		t.Fatalf("history holds %d rows, want 50", n)
	}
	vr, err := Verify(ctx, tabs)
	if err != nil || !vr.OK() {
		t.Fatalf("verify: %v %+v", err, vr)
	}
}

// TestMergeCopiesUntouchedRowGroups drives the verbatim row-group copy of
// the merge with tiny row groups, against the same reference model.
func TestMergeCopiesUntouchedRowGroups(t *testing.T) {
	m := newModelRun(t, Options{RowGroupBytes: 1}) // a row group per write batch
	var seed []datastream.Event
	for i := 0; i < 2000; i++ {
		seed = append(seed, genEvent(uint64(i+1), int64(i), "eu", false, int64(i)))
	}
	m.apply(1, seed)
	var copied, decoded int
	n := uint64(5000)
	for seq := int64(2); seq <= 4; seq++ {
		var evs []datastream.Event
		for j := 0; j < 20; j++ {
			n++
			evs = append(evs, genEvent(n, int64(1900+j*3+int(seq)), "eu", j%4 == 0, int64(n)))
		}
		r := m.apply(seq, evs)
		copied += r.RowGroupsCopied
		decoded += r.RowGroupsDecoded
	}
	if copied == 0 || decoded == 0 {
		t.Fatalf("row groups copied %d, decoded %d: the verbatim path was not exercised", copied, decoded)
	}
	m.check()
}

// modelRun applies batches to fresh tables while replaying the same events
// into the reference model (per key, the event with the greatest order).
type modelRun struct {
	t     *testing.T
	ctx   context.Context
	tabs  TableSet
	opts  Options
	key   []string
	model map[string]datastream.Event
}

func newModelRun(t *testing.T, opts Options) *modelRun {
	return &modelRun{t: t, ctx: context.Background(), tabs: memTables(), opts: opts, key: []string{"id", "region"}, model: map[string]datastream.Event{}}
}

func (m *modelRun) apply(seq int64, evs []datastream.Event) Result {
	m.t.Helper()
	b := Batch{Source: testSource, Key: m.key}
	for _, ev := range evs {
		b.Changes = append(b.Changes, toChange(m.t, ev))
		k := KeyText(ev.KeyValues)
		if cur, ok := m.model[k]; !ok || ev.Order.Compare(cur.Order) > 0 {
			m.model[k] = ev
		}
	}
	r, err := Apply(m.ctx, m.tabs, seq, b, m.opts)
	if err != nil {
		m.t.Fatal(err)
	}
	return r
}

// check compares the current state with the model and runs Verify.
func (m *modelRun) check() {
	m.t.Helper()
	got := readState(m.t, m.ctx, m.tabs)
	want := 0
	for k, ev := range m.model {
		if ev.Op == datastream.OpDelete {
			if _, ok := got[k]; ok {
				m.t.Fatalf("deleted key %s is in the current state", k)
			}
			continue
		}
		want++
		row, ok := got[k]
		if !ok || !value.EqualValues(row[2], ev.Row[2]) {
			m.t.Fatalf("key %s: got %v want %v", k, row, ev.Row)
		}
	}
	if len(got) != want {
		m.t.Fatalf("state has %d rows, model %d: a key was duplicated or lost", len(got), want)
	}
	if vr, err := Verify(m.ctx, m.tabs); err != nil || !vr.OK() {
		m.t.Fatalf("verify: %v %+v", err, vr)
	}
}

func TestWideningAKeyColumnIsAConflict(t *testing.T) {
	ctx := context.Background()
	small := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Integer, Nullable: true}, {Name: "v", Type: value.Integer, Nullable: true}}}
	wide := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long, Nullable: true}, {Name: "v", Type: value.Long, Nullable: true}}}
	mk := func(st value.StructType, id, v any, n uint64) Change {
		ev := genEvent(n, 0, "eu", false, 0)
		ev.Schema, ev.Row, ev.KeyNames, ev.KeyValues = st, []any{id, v}, []string{"id"}, []any{id}
		c, err := ChangeFromHistory(HistoryRow(ev), st, []int{0})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tabs := memTables()
	if _, err := Apply(ctx, tabs, 1, Batch{Source: small, Key: []string{"id"}, Changes: []Change{mk(small, int32(1), int32(1), 1)}}, Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := Apply(ctx, tabs, 2, Batch{Source: wide, Key: []string{"id"}, Changes: []Change{mk(wide, int64(2), int64(1<<40), 2)}}, Options{})
	if !errorsIs(err, ErrSchemaConflict) {
		t.Fatalf("widening the key: err = %v, want ErrSchemaConflict", err)
	}
}

func TestKeyTextTellsKeysApartAndAppendsToABuffer(t *testing.T) {
	keys := [][]any{
		{int64(1), "eu"},
		{int64(1), "e\u001fu"},
		{int64(11), ""},
		{"1", "eu"},
		{int64(1), nil},
		{value.Decimal{Unscaled: big.NewInt(100), Scale: 2}, "eu"},
	}
	seen := map[string]int{}
	buf := []byte("prefix")
	for i, k := range keys {
		kt := KeyText(k)
		if j, dup := seen[kt]; dup {
			t.Errorf("keys %v and %v share the text %q", keys[j], k, kt)
		}
		seen[kt] = i
		buf = AppendKeyText(buf[:6], k)
		if string(buf) != "prefix"+kt {
			t.Errorf("AppendKeyText(%v) = %q, want the prefix then %q", k, buf, kt)
		}
	}
}
