package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// passCounter is a log handler that counts Replay's passes and records the
// most keys and bytes a pass held.
type passCounter struct {
	passes   atomic.Int64
	maxKeys  atomic.Int64
	maxBytes atomic.Int64
	onPass   func()
}

func (h *passCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *passCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *passCounter) WithGroup(string) slog.Handler            { return h }
func (h *passCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "replay pass done" {
		return nil
	}
	h.passes.Add(1)
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "keys":
			h.maxKeys.Store(max(h.maxKeys.Load(), a.Value.Int64()))
		case "bytes":
			h.maxBytes.Store(max(h.maxBytes.Load(), a.Value.Int64()))
		}
		return true
	})
	if h.onPass != nil {
		h.onPass()
	}
	return nil
}

// scenarioEvent is genEvent with an explicit order (class, position and
// change-type rank, as datastream.BuildOrder lays them out) and change type.
func scenarioEvent(n uint64, class, rank byte, id int64, region string, del bool, amount int64, ct string) datastream.Event {
	ev := genEvent(n, id, region, del, amount)
	ev.Order.Bytes = append(append([]byte{class}, ev.Order.Bytes[1:]...), rank)
	ev.ChangeType, ev.Meta.ChangeType = ct, ct
	if class == 0 {
		ev.ReadMethod, ev.Order.Text = datastream.Backfill, "backfill"
	}
	return ev
}

// buildScenario applies a random event stream to fresh tables the way
// merges do, in random batches: inserts, updates and deletes of a
// composite key, backfill rows older than every change, primary-key
// changes (an UPDATE-DELETE and an UPDATE-INSERT at one position), events
// delivered late (shuffled) and twice, batches delivered twice. Seeds vary
// the table: kind 1 adds a column midway (schema mode merge), kind 2
// changes the schema midway in mode overwrite (late batches of the old
// schema included), kind 3 partitions the state table by region.
func buildScenario(t *testing.T, seed uint64) TableSet {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 42))
	kind := seed % 4
	nkeys := 10 + rng.IntN(40)
	nevents := uint64(60 + rng.IntN(160))
	var events []datastream.Event
	for n := uint64(1); n <= nevents; n++ {
		id, region := int64(rng.IntN(nkeys)), []string{"eu", "us"}[rng.IntN(2)]
		amount := rng.Int64N(1_000_000) - 500_000
		switch r := rng.IntN(20); {
		case r < 2:
			events = append(events, scenarioEvent(n, 0, 1, id, region, false, amount, ""))
		case r < 4:
			to := int64(rng.IntN(nkeys))
			events = append(events,
				scenarioEvent(n, 1, 0, id, region, true, 0, datastream.ChangeUpdateDelete),
				scenarioEvent(n, 1, 1, to, region, false, amount, "UPDATE-INSERT"))
		case r < 8:
			events = append(events, scenarioEvent(n, 1, 1, id, region, true, 0, "DELETE"))
		default:
			events = append(events, scenarioEvent(n, 1, 1, id, region, false, amount, "UPDATE-INSERT"))
		}
	}
	schemaOf := func(ev datastream.Event) value.StructType {
		if kind == 1 || kind == 2 {
			if n := ev.Order.Bytes[8]; uint64(n) > nevents/2 {
				return vipSource
			}
		}
		return testSource
	}
	delivered := append([]datastream.Event(nil), events...)
	for _, ev := range events {
		if rng.IntN(5) == 0 {
			delivered = append(delivered, ev)
		}
	}
	rng.Shuffle(len(delivered), func(i, j int) { delivered[i], delivered[j] = delivered[j], delivered[i] })
	opts := Options{TargetFileBytes: 1 << 12, Overwrite: kind == 2, Logger: slog.New(slog.DiscardHandler)}
	if kind == 3 {
		opts.StatePartitionColumns = []string{"region"}
	}
	tabs := memTables()
	seq := int64(0)
	for i := 0; i < len(delivered); {
		source := schemaOf(delivered[i])
		b := Batch{Source: source, Key: []string{"id", "region"}}
		for n := 1 + rng.IntN(60); i < len(delivered) && len(b.Changes) < n && value.Equal(schemaOf(delivered[i]), source); i++ {
			ev := delivered[i]
			if value.Equal(source, vipSource) {
				ev.Schema, ev.Row = vipSource, []any{ev.Row[0], ev.Row[1], ev.Row[2], ev.Order.Bytes[8]%2 == 0}
			}
			c, err := ChangeFromHistory(HistoryRow(ev), source, []int{0, 1})
			if err != nil {
				t.Fatal(err)
			}
			b.Changes = append(b.Changes, c)
		}
		seq++
		for range 1 + rng.IntN(2) {
			if _, err := Apply(ctx, tabs, seq, b, opts); err != nil {
				t.Fatalf("seed %d batch %d: %v", seed, seq, err)
			}
		}
	}
	return tabs
}

// readRows reads a table's rows in file order, in the table's schema.
func readRows(t *testing.T, ctx context.Context, store objstore.Store) (*delta.Snapshot, [][]any) {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]any
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			rows = append(rows, row)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return snap, rows
}

func stateRows(t *testing.T, ctx context.Context, tabs TableSet) (*delta.Snapshot, [][]any) {
	t.Helper()
	return readRows(t, ctx, tabs.State)
}

func tombstoneRows(t *testing.T, ctx context.Context, tabs TableSet) [][]any {
	t.Helper()
	_, rows := readRows(t, ctx, tabs.Tombstones)
	return rows
}

// rewriteState replaces the state table's content with rows, spread in
// their order over a few files, as drift behind the engine's back would.
func rewriteState(t *testing.T, ctx context.Context, tabs TableSet, snap *delta.Snapshot, rows [][]any, rng *rand.Rand) {
	t.Helper()
	var adds []delta.Add
	for len(rows) > 0 {
		n := min(len(rows), 1+rng.IntN(len(rows)))
		a, err := writeRows(ctx, tabs.State, delta.WriteOptions{Schema: snap.Schema(), PartitionColumns: snap.PartitionColumns()}, rows[:n], 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		adds, rows = append(adds, a...), rows[n:]
	}
	tx := snap.NewTransaction(delta.Operation{Name: "WRITE"})
	for _, f := range snap.Files() {
		tx.Remove(f.Remove(time.Now().UnixMilli(), true))
	}
	tx.Add(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// drift is a way the state table can differ from its history.
type drift struct {
	name  string
	apply func(rng *rand.Rand, schema value.StructType, rows [][]any, tombs [][]any) [][]any
}

func cloneRow(r []any) []any { return append([]any(nil), r...) }

var drifts = []drift{
	{"none", func(_ *rand.Rand, _ value.StructType, rows, _ [][]any) [][]any { return rows }},
	{"a changed value", func(rng *rand.Rand, s value.StructType, rows, _ [][]any) [][]any {
		r := cloneRow(rows[rng.IntN(len(rows))])
		r[s.Index("amount")] = value.Decimal{Unscaled: big.NewInt(-1), Scale: 2}
		rows[slices.IndexFunc(rows, func(x []any) bool { return reflect.DeepEqual(x[:2], r[:2]) })] = r
		return rows
	}},
	{"a changed position", func(rng *rand.Rand, s value.StructType, rows, _ [][]any) [][]any {
		i := rng.IntN(len(rows))
		rows[i] = cloneRow(rows[i])
		rows[i][s.Index(ColPosition)] = "elsewhere"
		return rows
	}},
	{"a missing row", func(rng *rand.Rand, _ value.StructType, rows, _ [][]any) [][]any {
		return slices.Delete(rows, 0, 1+rng.IntN(2))
	}},
	{"an extra row", func(rng *rand.Rand, s value.StructType, rows, _ [][]any) [][]any {
		r := cloneRow(rows[rng.IntN(len(rows))])
		r[0] = int64(1_000_000 + rng.IntN(10))
		return append(rows, r)
	}},
	{"a resurrected deleted key", func(rng *rand.Rand, s value.StructType, rows, tombs [][]any) [][]any {
		if len(tombs) == 0 {
			return rows
		}
		r := cloneRow(rows[0])
		tomb := tombs[rng.IntN(len(tombs))]
		r[0], r[1] = tomb[0], tomb[1]
		return append(rows, r)
	}},
	{"a duplicated row", func(rng *rand.Rand, _ value.StructType, rows, _ [][]any) [][]any {
		return append(rows, rows[rng.IntN(len(rows))])
	}},
	{"more differences than are listed", func(rng *rand.Rand, s value.StructType, rows, _ [][]any) [][]any {
		var out [][]any
		for i, r := range rows {
			r = cloneRow(r)
			switch i % 3 {
			case 0:
				continue // missing
			case 1:
				r[s.Index("amount")] = nil
			}
			out = append(out, r, cloneRow(r))
			extra := cloneRow(r)
			extra[0] = int64(2_000_000 + i)
			out = append(out, extra)
		}
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}},
}

// TestVerifyInPassesEqualsTheInMemoryVerify drifts the state tables of
// random histories in every way Verify reports, and checks that verifying
// in many small passes gives exactly the result of the former verify,
// which held the whole replay in memory: counts, verdict, and the listed
// mismatches in their order.
func TestVerifyInPassesEqualsTheInMemoryVerify(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 4; seed++ {
		base := buildScenario(t, seed)
		for _, d := range drifts {
			t.Run(fmt.Sprintf("seed %d with %s", seed, d.name), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(len(d.name))))
				tabs := cloneTables(t, ctx, base)
				snap, rows := stateRows(t, ctx, tabs)
				rewriteState(t, ctx, tabs, snap, d.apply(rng, snap.Schema(), rows, tombstoneRows(t, ctx, tabs)), rng)
				want, err := inMemoryVerify(ctx, tabs)
				if err != nil {
					t.Fatal(err)
				}
				if (d.name == "none") != want.OK() {
					t.Fatalf("the drift is not one: %+v", want)
				}
				for _, maxKeys := range []int{1 + int(seed%3), 1 << 20} {
					h := &passCounter{}
					got, err := Replay{MaxKeys: maxKeys, Logger: slog.New(h)}.Verify(ctx, tabs)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%d keys per pass (%d passes):\n got %+v\nwant %+v", maxKeys, h.passes.Load(), got, want)
					}
					if maxKeys < 10 && h.passes.Load() < 3 {
						t.Fatalf("%d keys per pass made only %d passes", maxKeys, h.passes.Load())
					}
				}
			})
		}
	}
}

// TestVerifyNamesTheDriftOfEachKind checks the reasons themselves on a
// fixed history, with a pass per key or two.
func TestVerifyNamesTheDriftOfEachKind(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	var evs []datastream.Event
	for n := uint64(1); n <= 40; n++ {
		evs = append(evs, genEvent(n, int64(n%9), "eu", n%4 == 0, int64(n)))
	}
	if _, err := Apply(ctx, tabs, 1, batchIn(t, testSource, evs...), Options{}); err != nil {
		t.Fatal(err)
	}
	snap, rows := stateRows(t, ctx, tabs)
	tombs := tombstoneRows(t, ctx, tabs)
	slices.SortFunc(rows, func(a, b []any) int { return value.CompareKeys(a[:2], b[:2]) })
	changed := cloneRow(rows[0])
	changed[2] = value.Decimal{Unscaled: big.NewInt(999), Scale: 2}
	extra := cloneRow(rows[1])
	extra[0] = int64(77)
	resurrected := cloneRow(rows[1])
	resurrected[0] = tombs[0][0]
	// rows[2] goes missing.
	drifted := [][]any{changed, rows[1], extra, rows[1], resurrected}
	drifted = append(drifted, rows[3:]...)
	rewriteState(t, ctx, tabs, snap, drifted, rand.New(rand.NewPCG(1, 1)))
	want := map[string]string{
		KeyText(rows[0][:2]):                     "column amount differs from the latest event in history",
		KeyText([]any{int64(77), "eu"}):          "unexpected: history says the key is deleted or never existed",
		KeyText(rows[1][:2]):                     "key appears more than once",
		KeyText([]any{tombs[0][0], tombs[0][1]}): "unexpected: history says the key is deleted or never existed",
		KeyText(rows[2][:2]):                     "missing: history's latest event for the key is an upsert",
	}
	res, err := Replay{MaxKeys: 2}.Verify(ctx, tabs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != len(want) || len(res.Mismatches) != len(want) {
		t.Fatalf("mismatches %+v, want %d", res, len(want))
	}
	for _, m := range res.Mismatches {
		if want[m.Key] != m.Reason {
			t.Errorf("key %s: %q, want %q", m.Key, m.Reason, want[m.Key])
		}
	}
	if last := res.Mismatches[len(res.Mismatches)-1]; !strings.HasPrefix(last.Reason, "missing") {
		t.Errorf("the missing key is not listed last: %+v", res.Mismatches)
	}
}

// TestRebuildInPassesEqualsTheInMemoryRebuild rebuilds drifted tables in
// small passes and in one, and compares them with what the former
// in-memory rebuild wrote: the same rows, tombstones, schema, properties
// and txn versions, and the rows come out clustered by key.
func TestRebuildInPassesEqualsTheInMemoryRebuild(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			base := buildScenario(t, seed)
			snap, rows := stateRows(t, ctx, base)
			rows = drifts[3].apply(rng, snap.Schema(), drifts[1].apply(rng, snap.Schema(), rows, nil), nil)
			rewriteState(t, ctx, base, snap, rows, rng)
			oracle := cloneTables(t, ctx, base)
			want, err := inMemoryRebuild(ctx, oracle, 1<<12)
			if err != nil || !want.OK() {
				t.Fatalf("in-memory rebuild: %v %+v", err, want)
			}
			var single []TableSet
			for _, r := range []Replay{{MaxKeys: 1 << 20}, {MaxKeys: 3}, {MaxKeys: 1 << 20, MaxBytes: 600}} {
				tabs := cloneTables(t, ctx, base)
				h := &passCounter{}
				r.TargetFileBytes, r.Now, r.Logger = 1<<12, func() time.Time { return now }, slog.New(h)
				got, err := r.Rebuild(ctx, tabs)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%+v: rebuild result %+v, want %+v", r, got, want)
				}
				if r.MaxKeys == 3 && h.passes.Load() < 6 { // rebuild, then verify
					t.Fatalf("%d keys per pass made only %d passes", r.MaxKeys, h.passes.Load())
				}
				sameTable(t, ctx, oracle.State, tabs.State, -1)
				sameTable(t, ctx, oracle.Tombstones, tabs.Tombstones, 2+len(tombstoneMeta)-1)
				checkClustered(t, ctx, tabs.State)
				checkClustered(t, ctx, tabs.Tombstones)
				for _, row := range tombstoneRows(t, ctx, tabs) {
					if row[len(row)-1] != value.MicrosOf(now) {
						t.Fatalf("tombstone %v was not deleted at the rebuild's time", row)
					}
				}
				if single == nil {
					single = append(single, tabs)
				} else if a, b := allRows(t, ctx, single[0].State), allRows(t, ctx, tabs.State); !reflect.DeepEqual(a, b) {
					t.Fatalf("rebuilt in passes, the rows differ from one pass's")
				}
			}
		})
	}
}

// allRows reads a table's rows, sorted by key (its first two columns).
func allRows(t *testing.T, ctx context.Context, store objstore.Store) [][]any {
	t.Helper()
	_, rows := readRows(t, ctx, store)
	slices.SortFunc(rows, func(a, b []any) int { return value.CompareKeys(a[:2], b[:2]) })
	return rows
}

// sameTable compares two tables' schema, properties, txn versions and
// rows, leaving out column skip (-1 for none).
func sameTable(t *testing.T, ctx context.Context, a, b objstore.Store, skip int) {
	t.Helper()
	sa, err := delta.Open(a).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := delta.Open(b).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Schema().String() != sb.Schema().String() || !reflect.DeepEqual(sa.Configuration(), sb.Configuration()) || !reflect.DeepEqual(sa.PartitionColumns(), sb.PartitionColumns()) {
		t.Fatalf("%s: schema %s %v, partitions %v, want %s %v, %v", b.URL(), sb.Schema(), sb.Configuration(), sb.PartitionColumns(), sa.Schema(), sa.Configuration(), sa.PartitionColumns())
	}
	va, oka := sa.TxnVersion(AppID("db.t"))
	vb, okb := sb.TxnVersion(AppID("db.t"))
	if va != vb || oka != okb {
		t.Fatalf("%s: txn version %d %v, want %d %v", b.URL(), vb, okb, va, oka)
	}
	ra, rb := allRows(t, ctx, a), allRows(t, ctx, b)
	if len(ra) != len(rb) {
		t.Fatalf("%s: %d rows, want %d", b.URL(), len(rb), len(ra))
	}
	for i := range ra {
		for j := range ra[i] {
			if j != skip && !value.EqualValues(ra[i][j], rb[i][j]) {
				t.Fatalf("%s: row %v, want %v", b.URL(), rb[i], ra[i])
			}
		}
	}
}

// checkClustered checks that within each partition every file is sorted by
// key and the files' key ranges do not overlap, as compaction leaves them.
func checkClustered(t *testing.T, ctx context.Context, store objstore.Store) {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ lo, hi []any }
	parts := map[string][]span{}
	for _, f := range snap.Files() {
		var s span
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(r []any) error {
			k := r[:2]
			if s.hi != nil && value.CompareKeys(s.hi, k) > 0 {
				return fmt.Errorf("key %v after %v", k, s.hi)
			}
			if s.lo == nil {
				s.lo = k
			}
			s.hi = k
			return nil
		})
		if err != nil {
			t.Fatalf("%s: file %s is not sorted by key: %v", store.URL(), f.Path, err)
		}
		p := fmt.Sprint(f.PartitionValues)
		parts[p] = append(parts[p], s)
	}
	for p, spans := range parts {
		slices.SortFunc(spans, func(a, b span) int { return value.CompareKeys(a.lo, b.lo) })
		for i := 1; i < len(spans); i++ {
			if value.CompareKeys(spans[i-1].hi, spans[i].lo) >= 0 {
				t.Fatalf("%s partition %s: files overlap: %v..%v and %v..%v", store.URL(), p, spans[i-1].lo, spans[i-1].hi, spans[i].lo, spans[i].hi)
			}
		}
	}
}

// TestRebuildThatFailsMidwayChangesNothing stops a rebuild after its first
// pass: neither table has a new version, so readers never see a table
// half rebuilt, and the drift is still there to rebuild.
func TestRebuildThatFailsMidwayChangesNothing(t *testing.T) {
	ctx := context.Background()
	tabs := buildScenario(t, 2)
	snap, rows := stateRows(t, ctx, tabs)
	rng := rand.New(rand.NewPCG(2, 2))
	rewriteState(t, ctx, tabs, snap, drifts[3].apply(rng, snap.Schema(), rows, nil), rng)
	versions := func() [2]int64 {
		var out [2]int64
		for i, s := range []objstore.Store{tabs.State, tabs.Tombstones} {
			snap, err := delta.Open(s).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = snap.Version()
		}
		return out
	}
	before := versions()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &passCounter{onPass: cancel}
	_, err := Replay{MaxKeys: 3, Logger: slog.New(h)}.Rebuild(runCtx, tabs)
	if err == nil || h.passes.Load() != 1 {
		t.Fatalf("rebuild stopped after pass %d: err = %v", h.passes.Load(), err)
	}
	if after := versions(); after != before {
		t.Fatalf("table versions went from %v to %v", before, after)
	}
	if vr, err := Verify(ctx, tabs); err != nil || vr.OK() {
		t.Fatalf("verify after the failed rebuild: %v %+v", err, vr)
	}
}

// TestVerifyRefusesAHistoryRowWithoutKeyInPassesToo: a history row whose
// key is null fails a verify, as it failed the in-memory one, whichever
// pass would hold it.
func TestVerifyRefusesAHistoryRowWithoutKeyInPassesToo(t *testing.T) {
	ctx := context.Background()
	tabs := buildScenario(t, 1)
	snap, err := delta.Open(tabs.History).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Beside keys of the last pass, so that the row group's bounds are
	// those of the last pass: bounds say nothing of nulls.
	var rows [][]any
	for i := range 3 {
		row := HistoryRow(genEvent(uint64(5000+i), int64(9000+i), "us", false, 1))
		if i == 1 {
			row[len(historyMeta)] = nil // id
		}
		if row, err = Conform(row, HistorySchema(testSource), snap.Schema()); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	adds, err := writeRows(ctx, tabs.History, delta.WriteOptions{Schema: snap.Schema(), PartitionColumns: snap.PartitionColumns()}, rows, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(delta.Operation{Name: "WRITE"})
	tx.Add(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := inMemoryVerify(ctx, tabs); err == nil || !strings.Contains(err.Error(), "is null") {
		t.Fatalf("the in-memory verify: %v", err)
	}
	for _, maxKeys := range []int{1, 5, 1 << 20} {
		if _, err := (Replay{MaxKeys: maxKeys}).Verify(ctx, tabs); err == nil || !strings.Contains(err.Error(), `primary key column "id" is null`) {
			t.Fatalf("%d keys per pass: %v", maxKeys, err)
		}
	}
}
