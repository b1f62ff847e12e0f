package cdc

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// scd2Event is genEvent with a note that does not change, so that equal
// amounts are equal rows (collapsed versions).
func scd2Event(n uint64, id int64, del bool, amount int64) datastream.Event {
	ev := genEvent(n, id, "eu", del, amount)
	ev.Row = slices.Clone(ev.Row)
	ev.Row[3] = "same"
	return ev
}

// backfillEvent is a backfill row of key id read at the source time of
// CDC position n (its ordering key sorts before every CDC one).
func backfillEvent(n uint64, id int64, amount int64) datastream.Event {
	ev := scd2Event(n, id, false, amount)
	ev.Order = datastream.OrderKey{Bytes: binary.BigEndian.AppendUint64([]byte{0}, n), Text: "backfill"}
	ev.ReadMethod, ev.ChangeType, ev.Meta.ChangeType = datastream.Backfill, "INSERT", "INSERT"
	return ev
}

// refVersion is a version of the reference model.
type refVersion struct {
	ev      datastream.Event // the change that opened it
	to      any              // value.Micros, or nil while open
	current bool
}

// scd2Reference replays events sorted by ordering key, key by key, the
// plain way the contract states mode scd2.
func scd2Reference(events []datastream.Event) map[string][]refVersion {
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b datastream.Event) int { return a.Order.Compare(b.Order) })
	perKey := map[string][]datastream.Event{}
	for _, ev := range sorted {
		k := KeyText(ev.KeyValues)
		if evs := perKey[k]; len(evs) > 0 && evs[len(evs)-1].Order.Compare(ev.Order) == 0 {
			continue // delivered twice
		}
		perKey[k] = append(perKey[k], ev)
	}
	out := map[string][]refVersion{}
	for k, evs := range perKey {
		var vs []refVersion
		open := false
		firstCDC := slices.IndexFunc(evs, func(ev datastream.Event) bool { return ev.ReadMethod != datastream.Backfill })
		for _, ev := range evs {
			switch {
			case ev.Op == datastream.OpDelete:
				if open {
					vs[len(vs)-1].to = ev.SourceTimestamp
				}
				open = false
			case ev.ReadMethod == datastream.Backfill && firstCDC >= 0 && ev.SourceTimestamp > evs[firstCDC].SourceTimestamp:
				// read after the key's first CDC change: covered by it
			case open && value.EqualValues(vs[len(vs)-1].ev.Row[2], ev.Row[2]) && vs[len(vs)-1].ev.Row[3] == ev.Row[3]:
				// unchanged
			default:
				if open {
					vs[len(vs)-1].to = ev.SourceTimestamp
				}
				vs = append(vs, refVersion{ev: ev})
				open = true
			}
		}
		if open {
			vs[len(vs)-1].current = true
		}
		if len(vs) > 0 {
			out[k] = vs
		}
	}
	return out
}

// readSCD2 returns an scd2 table's rows per key text, each key's sorted by
// valid-from order, in SCD2Schema(testSource).
func readSCD2(t *testing.T, ctx context.Context, tabs TableSet) map[string][][]any {
	t.Helper()
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := TableMode(snap); m != ModeSCD2 {
		t.Fatalf("table mode %s, want scd2", m)
	}
	out := map[string][][]any{}
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			r, err := Conform(row, snap.Schema(), SCD2Schema(testSource))
			if err != nil {
				return err
			}
			k := KeyText([]any{r[0], r[1]})
			out[k] = append(out[k], r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, rows := range out {
		slices.SortFunc(rows, func(a, b []any) int { return bytes.Compare(scd2Order(a), scd2Order(b)) })
	}
	return out
}

// checkSCD2 compares an scd2 table with the reference model of events,
// checks that every key's intervals are ordered and do not overlap, and
// runs Verify.
func checkSCD2(t *testing.T, ctx context.Context, tabs TableSet, events []datastream.Event) {
	t.Helper()
	got := readSCD2(t, ctx, tabs)
	model := scd2Reference(events)
	lastOrders := map[string][]byte{} // per key, its last change's order
	for _, ev := range events {
		k := KeyText(ev.KeyValues)
		if bytes.Compare(ev.Order.Bytes, lastOrders[k]) > 0 {
			lastOrders[k] = ev.Order.Bytes
		}
	}
	n := len(testSource.Fields)
	for k, want := range model {
		rows := got[k]
		if len(rows) != len(want) {
			t.Fatalf("key %s: %d versions, model %d: %v", k, len(rows), len(want), rows)
		}
		for i, w := range want {
			r := rows[i]
			if string(r[n+3].([]byte)) != string(w.ev.Order.Bytes) || !value.EqualValues(r[2], w.ev.Row[2]) {
				t.Fatalf("key %s version %d: opened by %s with %v, want %s with %v", k, i, r[n+2], r[2], w.ev.Order.Text, w.ev.Row[2])
			}
			if r[n+4] != w.ev.SourceTimestamp || r[n+5] != w.to || r[n+6] != w.current {
				t.Fatalf("key %s version %d: from %v to %v current %v, want %v %v %v", k, i, r[n+4], r[n+5], r[n+6], w.ev.SourceTimestamp, w.to, w.current)
			}
			var wantLast any
			if i == len(want)-1 {
				wantLast = lastOrders[k]
			}
			if !value.EqualValues(r[n+7], wantLast) {
				t.Fatalf("key %s version %d: last order %v, want %v", k, i, r[n+7], wantLast)
			}
			if i > 0 {
				prevTo, _ := rows[i-1][n+5].(value.Micros)
				if rows[i-1][n+5] == nil || prevTo > r[n+4].(value.Micros) {
					t.Fatalf("key %s: version %d ends at %v, after version %d begins at %v", k, i-1, rows[i-1][n+5], i, r[n+4])
				}
			}
		}
	}
	for k := range got {
		if model[k] == nil {
			t.Fatalf("key %s has versions, the model none", k)
		}
	}
	vr, err := Verify(ctx, tabs)
	if err != nil || !vr.OK() {
		t.Fatalf("verify: %v %+v", err, vr)
	}
}

// scd2Workload is random events of few keys: amounts from few values (so
// versions collapse), deletes, and backfill rows read before or after the
// key's first changes.
func scd2Workload(rng *rand.Rand) []datastream.Event {
	nkeys := 2 + rng.IntN(12)
	var events []datastream.Event
	for id := range int64(nkeys) {
		if rng.IntN(2) == 0 {
			events = append(events, backfillEvent(uint64(1+rng.IntN(60)), id, rng.Int64N(3)))
		}
	}
	for n := uint64(1); n <= uint64(20+rng.IntN(120)); n++ {
		events = append(events, scd2Event(n, int64(rng.IntN(nkeys)), rng.IntN(5) == 0, rng.Int64N(3)))
	}
	return events
}

// TestSCD2MatchesReferenceModel: random events (shuffled, duplicated
// events and batches, random batch sizes, backfill rows, collapsing
// values, deletes, late changes landing between merged ones) applied in
// mode scd2 equal the sorted replay of the rule; so do verify and rebuild.
func TestSCD2MatchesReferenceModel(t *testing.T) {
	ctx := context.Background()
	vectors := 0 // written by the seeds with deletion vectors on
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprintf("seed %d converges to the replay", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			events := scd2Workload(rng)
			opts := modePropertyOptions(seed, ModeSCD2)
			tabs := applyShuffled(t, rng, events, opts)
			checkSCD2(t, ctx, tabs, events)
			vectors += vectorsOf(t, ctx, tabs, opts)
			vr, err := Replay{MaxKeys: 3}.Rebuild(ctx, tabs)
			if err != nil || !vr.OK() {
				t.Fatalf("rebuild in passes of 3 keys: %v %+v", err, vr)
			}
			checkSCD2(t, ctx, tabs, events)
		})
	}
	if vectors == 0 {
		t.Error("no seed with deletion vectors on wrote one")
	}
}

// TestSCD2Rules walks the contract's cases one batch at a time.
func TestSCD2Rules(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	var all []datastream.Event
	apply := func(seq int64, evs ...datastream.Event) Result {
		t.Helper()
		all = append(all, evs...)
		r, err := Apply(ctx, tabs, seq, softBatch(t, evs...), Options{Mode: ModeSCD2})
		if err != nil {
			t.Fatal(err)
		}
		checkSCD2(t, ctx, tabs, all)
		return r
	}
	versions := func(id int64) [][]any { return readSCD2(t, ctx, tabs)[KeyText([]any{id, "eu"})] }
	n := len(testSource.Fields)

	// A backfill row read before the key's first CDC change opens a
	// version; one read after it opens none.
	apply(1, backfillEvent(5, 1, 0), backfillEvent(30, 2, 0), scd2Event(10, 1, false, 1), scd2Event(20, 2, false, 1))
	if v := versions(1); len(v) != 2 || v[0][n+5] != scd2Event(10, 0, false, 0).SourceTimestamp {
		t.Fatalf("key 1: the backfill row read before the first change is a version closed by it: %v", v)
	}
	if v := versions(2); len(v) != 1 || v[0][2].(value.Decimal).String() != "0.01" {
		t.Fatalf("key 2: the backfill row read after the first change opens none: %v", v)
	}
	// An unchanged upsert collapses into the open version: only the
	// version's record of the key's last change moves.
	if r := apply(2, scd2Event(40, 1, false, 1)); r.Inserted != 0 || len(versions(1)) != 2 {
		t.Fatalf("unchanged upsert: %+v", r)
	}
	// A late change between the version's opening and the collapsed
	// upsert splits it: the collapsed one opens a version again.
	apply(3, scd2Event(35, 1, false, 7))
	if v := versions(1); len(v) != 4 || v[3][n+6] != true || v[2][n+5] != scd2Event(40, 0, false, 0).SourceTimestamp {
		t.Fatalf("key 1 after the late change: %v", v)
	}
	// A delete closes the open version; the next upsert opens one even
	// with the same values.
	apply(4, scd2Event(50, 1, true, 0))
	if v := versions(1); v[3][n+6] != false || v[3][n+5] == nil {
		t.Fatalf("deleted key 1 still has an open version: %v", v)
	}
	apply(5, scd2Event(60, 1, false, 1))
	if v := versions(1); len(v) != 5 || v[4][n+6] != true {
		t.Fatalf("upsert after the delete: %v", v)
	}
	// A late change after key 2's first one lands after it; the backfill
	// row stays covered.
	apply(6, scd2Event(25, 2, false, 5))
	if v := versions(2); len(v) != 2 {
		t.Fatalf("key 2 after a late change: %v", v)
	}
	// Key 3's backfill row read after its first CDC change opens nothing;
	// a late backfill row read before that change opens a version, closed
	// by the change.
	apply(7, backfillEvent(65, 3, 9), scd2Event(62, 3, false, 4))
	if v := versions(3); len(v) != 1 {
		t.Fatalf("key 3: %v", v)
	}
	apply(8, backfillEvent(60, 3, 7))
	if v := versions(3); len(v) != 2 || v[0][n+5] != scd2Event(62, 0, false, 0).SourceTimestamp || v[1][n+6] != true {
		t.Fatalf("key 3 after a late backfill row: %v", v)
	}
	// A key's backfill row merged alone opens a version; the key's first
	// CDC change, older than the backfill read, covers it when it comes.
	apply(10, backfillEvent(80, 5, 1))
	if v := versions(5); len(v) != 1 {
		t.Fatalf("key 5 backfilled: %v", v)
	}
	apply(11, scd2Event(75, 5, false, 2))
	if v := versions(5); len(v) != 1 || v[0][2].(value.Decimal).String() != "0.02" {
		t.Fatalf("key 5 after its first CDC change: %v", v)
	}
	// A primary-key change: the UPDATE-DELETE of the old key closes its
	// version, the UPDATE-INSERT of the new key opens one.
	apply(12, scd2Event(90, 6, false, 3))
	del, ins := scd2Event(95, 6, true, 0), scd2Event(96, 7, false, 3)
	del.ChangeType, del.Meta.ChangeType = "UPDATE-DELETE", "UPDATE-DELETE"
	apply(13, del, ins)
	if v := versions(6); len(v) != 1 || v[0][n+5] != del.SourceTimestamp || v[0][n+6] != false {
		t.Fatalf("old key of a key change: %v", v)
	}
	if v := versions(7); len(v) != 1 || v[0][n+4] != ins.SourceTimestamp || v[0][n+6] != true {
		t.Fatalf("new key of a key change: %v", v)
	}
	// A delete of a key never upserted: no version, a tombstone.
	if r := apply(14, scd2Event(70, 4, true, 0)); r.Buried != 1 || versions(4) != nil {
		t.Fatalf("delete of a key without versions: %+v", r)
	}
}

// TestSCD2CrashBetweenCommitsConverges replays a batch after each prefix
// of its three commits landed.
func TestSCD2CrashBetweenCommitsConverges(t *testing.T) {
	base := []datastream.Event{scd2Event(1, 1, false, 1), scd2Event(3, 2, false, 2), scd2Event(5, 3, false, 3), scd2Event(7, 1, false, 1)}
	batch2 := []datastream.Event{scd2Event(4, 1, false, 2), scd2Event(6, 2, true, 0), scd2Event(8, 4, true, 0), scd2Event(2, 3, false, 0), backfillEvent(9, 2, 2)}
	crashBetweenCommits(t, ModeSCD2, base, batch2, checkSCD2)
}

// TestSCD2FollowsSchemaEvolution: a newer batch adds a column and a late
// batch in the older schema lands between versions, in both schema modes.
func TestSCD2FollowsSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	for _, overwrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("schema mode overwrite=%v", overwrite), func(t *testing.T) {
			tabs := memTables()
			opts := Options{Mode: ModeSCD2, Overwrite: overwrite}
			if _, err := Apply(ctx, tabs, 1, softBatch(t, scd2Event(1, 1, false, 1)), opts); err != nil {
				t.Fatal(err)
			}
			if _, err := Apply(ctx, tabs, 2, widerBatch(t, scd2Event(10, 1, false, 1)), opts); err != nil {
				t.Fatal(err)
			}
			if _, err := Apply(ctx, tabs, 3, softBatch(t, scd2Event(5, 1, false, 5)), opts); err != nil {
				t.Fatal(err)
			}
			snap, err := delta.Open(tabs.State).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var rows [][]any
			for _, f := range snap.Files() {
				if err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{}, func(r []any) error {
					rc, err := Conform(r, snap.Schema(), SCD2Schema(widerSource))
					rows = append(rows, rc)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			slices.SortFunc(rows, func(a, b []any) int { return bytes.Compare(scd2Order(a), scd2Order(b)) })
			// 1 (amount 1), 5 (amount 5), 10 (amount 1 again, vip): three
			// versions, only the last with vip set.
			cur := scd2Row{n: len(widerSource.Fields)}.current()
			if len(rows) != 3 || rows[0][4] != nil || rows[1][4] != nil || rows[2][4] != true || rows[2][cur] != true {
				t.Fatalf("versions: %v", rows)
			}
			if vr, err := Verify(ctx, tabs); err != nil || !vr.OK() {
				t.Fatalf("verify: %v %+v", err, vr)
			}
		})
	}
}

// TestSCD2VerifyFindsAWrongInterval: verify compares the versions, not
// only the current rows.
func TestSCD2VerifyFindsAWrongInterval(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	evs := []datastream.Event{scd2Event(1, 1, false, 1), scd2Event(2, 1, false, 2), scd2Event(3, 2, false, 2)}
	if _, err := Apply(ctx, tabs, 1, softBatch(t, evs...), Options{Mode: ModeSCD2}); err != nil {
		t.Fatal(err)
	}
	n := len(testSource.Fields)
	var rows [][]any
	for _, vs := range readSCD2(t, ctx, tabs) {
		for _, r := range vs {
			if r[0] == int64(1) && r[n+5] != nil {
				r[n+5] = r[n+5].(value.Micros) + 1
			}
			rows = append(rows, r)
		}
	}
	replaceStateRows(t, ctx, tabs, rows)
	vr, err := Verify(ctx, tabs)
	if err != nil || vr.Total != 1 || vr.Mismatches[0].Key != KeyText([]any{int64(1), "eu"}) {
		t.Fatalf("verify: %v %+v", err, vr)
	}
	if vr, err := Rebuild(ctx, tabs, 0); err != nil || !vr.OK() {
		t.Fatalf("rebuild: %v %+v", err, vr)
	}
	checkSCD2(t, ctx, tabs, evs)
}

// TestSCD2RewritesOnlyTheVersionsThatChange: a step replaces the versions
// its changes alter (the open one it closes, one a late change splits) and
// leaves the others where they are, with deletion vectors (only those rows
// are marked, also in a file that has a vector already) and without (the
// rewrite copies the others); the table still equals the rule's replay.
func TestSCD2RewritesOnlyTheVersionsThatChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"with deletion vectors, only the replaced rows are marked", Options{DeletionVectors: true, DVMinFileBytes: -1}},
		{"copy on write, the rewrite keeps the unchanged versions", Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tabs := memTables()
			opts := tc.opts
			opts.Mode = ModeSCD2
			var all []datastream.Event
			// apply merges evs and returns the version rows the step wrote
			// and those it dropped.
			apply := func(seq int64, evs ...datastream.Event) (written, dropped int) {
				t.Helper()
				before := 0
				if seq > 1 {
					before = len(slices.Concat(slices.Collect(maps.Values(readSCD2(t, ctx, tabs)))...))
				}
				paths := map[string]bool{}
				if seq > 1 {
					for _, f := range stateSnapshot(t, ctx, tabs.State).Files() {
						paths[f.Path] = true
					}
				}
				all = append(all, evs...)
				if _, err := Apply(ctx, tabs, seq, softBatch(t, evs...), opts); err != nil {
					t.Fatal(err)
				}
				checkSCD2(t, ctx, tabs, all)
				for _, f := range stateSnapshot(t, ctx, tabs.State).Files() {
					if !paths[f.Path] {
						st, err := delta.ParseStats(f.Stats)
						if err != nil {
							t.Fatal(err)
						}
						written += int(st.NumRecords)
					}
				}
				if seq > 1 {
					written -= metric(t, lastMetrics(t, ctx, tabs.State), "numTargetRowsCopied")
				}
				after := len(slices.Concat(slices.Collect(maps.Values(readSCD2(t, ctx, tabs)))...))
				return written, written - (after - before)
			}
			// Each step also inserts new keys, so that the files a step
			// writes hold more rows than it later replaces there (a vector
			// marking half a file's rows gives way to a rewrite).
			const fill = 4
			filler := func(seq int64) []datastream.Event {
				var evs []datastream.Event
				for j := range int64(fill) {
					evs = append(evs, scd2Event(uint64(1000+10*seq+j), 1000+10*seq+j, false, 1))
				}
				return evs
			}
			apply(1, append(filler(1), scd2Event(10, 1, false, 1), scd2Event(20, 2, false, 1))...)
			steps := []struct {
				what             string
				ev               datastream.Event
				written, dropped int
			}{
				{"an update closes key 1's open version and opens one", scd2Event(30, 1, false, 2), 2, 1},
				{"an update of key 2, whose open version lies in a file the last step marked or rewrote", scd2Event(40, 2, false, 2), 2, 1},
				{"an update of key 1 leaves its first, closed version in place", scd2Event(50, 1, false, 3), 2, 1},
				{"a late change of key 1 splits the version it lands in and nothing else", scd2Event(35, 1, false, 9), 2, 1},
				{"a collapsed upsert moves the open version's record of the last change", scd2Event(60, 1, false, 3), 1, 1},
				{"a delete closes key 2's open version", scd2Event(70, 2, true, 0), 1, 1},
			}
			for i, s := range steps {
				seq := int64(i + 2)
				if w, d := apply(seq, append(filler(seq), s.ev)...); w != s.written+fill || d != s.dropped {
					t.Fatalf("%s: wrote %d version rows and dropped %d, want %d and %d", s.what, w-fill, d, s.written, s.dropped)
				}
			}
			if opts.DeletionVectors {
				marked := int64(0)
				for _, f := range stateSnapshot(t, ctx, tabs.State).Files() {
					if f.DeletionVector != nil {
						marked += f.DeletionVector.Cardinality
					}
				}
				if want := int64(len(steps)); marked != want {
					t.Errorf("deletion vectors mark %d rows, want %d (one replaced version per step)", marked, want)
				}
			}
		})
	}
}

// TestChangedVersionsKeepsTheStoredVersionsThatStayTheSame pairs stored
// and new versions by the change that opened them: equal ones stay, the
// others are written or dropped, a duplicated stored version included.
func TestChangedVersionsKeepsTheStoredVersionsThatStayTheSame(t *testing.T) {
	v := func(order byte, to int64) []any {
		var end any // open
		if to > 0 {
			end = value.Micros(to)
		}
		return []any{int64(order), []byte{1, order}, end}
	}
	at := func(pos int64) rowAt { return rowAt{path: "f", pos: pos} }
	for _, tc := range []struct {
		name      string
		stored    [][]any
		rows      [][]any
		write     [][]any
		drop      []rowAt
		storedPos []int64
	}{
		{"equal versions stay, a changed one and a new one are written",
			[][]any{v(1, 2), v(2, 0)}, [][]any{v(1, 2), v(2, 3), v(3, 0)},
			[][]any{v(2, 3), v(3, 0)}, []rowAt{at(1)}, []int64{0, 1}},
		{"a version the rule no longer opens is dropped",
			[][]any{v(1, 2), v(2, 3), v(3, 0)}, [][]any{v(1, 3), v(3, 0)},
			[][]any{v(1, 3)}, []rowAt{at(10), at(11)}, []int64{10, 11, 12}},
		{"a version stored twice keeps one row",
			[][]any{v(1, 0), v(1, 0)}, [][]any{v(1, 0)},
			nil, []rowAt{at(6)}, []int64{5, 6}},
		{"a key without stored versions writes them all",
			nil, [][]any{v(1, 0)},
			[][]any{v(1, 0)}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// scd2Order reads the column before the scd2 ones: pad the
			// test rows to that layout.
			pad := func(rows [][]any) [][]any {
				var out [][]any
				for _, r := range rows {
					out = append(out, append(slices.Clone(r[1:2]), make([]any, len(scd2Meta))...))
					out[len(out)-1][1] = r[2]
				}
				return out
			}
			var ats []rowAt
			for _, p := range tc.storedPos {
				ats = append(ats, at(p))
			}
			write, drop := changedVersions(pad(tc.stored), ats, pad(tc.rows))
			if !slices.EqualFunc(write, pad(tc.write), sameValues) || !slices.Equal(drop, tc.drop) {
				t.Errorf("write %v drop %v, want %v and %v", write, drop, pad(tc.write), tc.drop)
			}
		})
	}
}
