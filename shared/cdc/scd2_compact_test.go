package cdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
)

// compactState compacts a state table as maintenance does
// (CompactionOptions) into files of about target bytes, and returns the
// files that hold only closed versions after it.
func compactState(t *testing.T, ctx context.Context, tabs TableSet, target int64) []delta.Add {
	t.Helper()
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := CompactionOptions(snap)
	o.TargetFileBytes = target
	if _, err := snap.Optimize(ctx, o); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if snap, err = delta.Open(tabs.State).Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range snap.Files() {
		if st, err := delta.ParseStats(f.Stats); err != nil {
			t.Fatal(err)
		} else if n, ok := st.NullCountOf(ColValidTo); !ok || (n > 0 && n < st.NumRecords) {
			t.Fatalf("compacted file %s mixes open and closed versions (%d of %d open, stats %v)", f.Path, n, st.NumRecords, ok)
		}
	}
	closed, _ := splitClosedFiles(snap.Files())
	return closed
}

// TestSCD2MatchesReferenceModelWithCompactionBetweenBatches: the reference
// model property of TestSCD2MatchesReferenceModel, with the state table
// compacted between random batches, so that merges find closed versions
// in files of their own, which a key's extension skips and a late change
// or a deleted key's next change must read.
func TestSCD2MatchesReferenceModelWithCompactionBetweenBatches(t *testing.T) {
	ctx := context.Background()
	skipped := 0 // merges that found files of closed versions only
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprintf("seed %d converges to the replay", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			events := scd2Workload(rng)
			opts := modePropertyOptions(seed, ModeSCD2)
			delivered := append([]datastream.Event(nil), events...)
			rng.Shuffle(len(delivered), func(i, j int) { delivered[i], delivered[j] = delivered[j], delivered[i] })
			tabs := memTables()
			closed := 0
			for i, seq := 0, int64(1); i < len(delivered); seq++ {
				end := min(i+1+rng.IntN(20), len(delivered))
				if closed > 0 {
					skipped++
				}
				if _, err := Apply(ctx, tabs, seq, softBatch(t, delivered[i:end]...), opts); err != nil {
					t.Fatal(err)
				}
				i = end
				if rng.IntN(2) == 0 {
					// Small targets leave mixed files that are not small:
					// compaction splits those too.
					closed = len(compactState(t, ctx, tabs, int64(1)<<(10+rng.IntN(10))))
				}
			}
			checkSCD2(t, ctx, tabs, events)
		})
	}
	if skipped == 0 {
		t.Error("no merge found a file of closed versions only")
	}
}

// TestSCD2ReadsTheClosedVersionsOfKeysWithoutAnOpenOne: key 1 deleted,
// its versions in a file of closed versions only, takes changes after and
// before its delete; each must see the key's closed versions (its last
// records its last change), or it would open a version beside a stale
// record, or write versions twice. Key 2, live, is extended without
// reading that file.
func TestSCD2ReadsTheClosedVersionsOfKeysWithoutAnOpenOne(t *testing.T) {
	ctx := context.Background()
	base := []datastream.Event{
		scd2Event(10, 1, false, 1), scd2Event(20, 1, false, 2), scd2Event(40, 1, true, 0),
		scd2Event(12, 3, false, 1), scd2Event(42, 3, true, 0),
		scd2Event(11, 2, false, 1),
	}
	for _, tc := range []struct {
		name  string
		batch []datastream.Event
		// reads is how many state files the merge reads, when the test
		// says.
		reads int
	}{
		{name: "an upsert after the delete opens a version", batch: []datastream.Event{scd2Event(50, 1, false, 2)}},
		{name: "an upsert equal to the last closed version after the delete opens one too", batch: []datastream.Event{scd2Event(50, 1, false, 0)}},
		{name: "a delete after the delete changes only the record of the last change", batch: []datastream.Event{scd2Event(50, 1, true, 0)}},
		{name: "a late upsert before the delete splits the closed version", batch: []datastream.Event{scd2Event(30, 1, false, 5)}},
		{name: "a late delete before the delete ends the closed version sooner", batch: []datastream.Event{scd2Event(30, 1, true, 0)}},
		{name: "a late upsert before the key's first change adds a version before the others", batch: []datastream.Event{scd2Event(5, 1, false, 7)}},
		{name: "an update of a live key reads the file of open versions only", batch: []datastream.Event{scd2Event(50, 2, false, 2)}, reads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tabs := memTables()
			opts := Options{Mode: ModeSCD2}
			if _, err := Apply(ctx, tabs, 1, softBatch(t, base...), opts); err != nil {
				t.Fatal(err)
			}
			closed := compactState(t, ctx, tabs, 1<<20)
			if len(closed) != 1 {
				t.Fatalf("%d files of closed versions after compaction, want 1", len(closed))
			}
			r, err := Apply(ctx, tabs, 2, softBatch(t, tc.batch...), opts)
			if err != nil {
				t.Fatal(err)
			}
			checkSCD2(t, ctx, tabs, append(append([]datastream.Event(nil), base...), tc.batch...))
			if tc.reads > 0 {
				if r.FilesRead != tc.reads {
					t.Fatalf("the merge read %d state files, want %d: the file of closed versions, whose keys bound key 2, is not needed", r.FilesRead, tc.reads)
				}
				snap, err := delta.Open(tabs.State).Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if after, _ := splitClosedFiles(snap.Files()); len(after) != 1 || after[0].Path != closed[0].Path {
					t.Fatalf("files of closed versions %v after the merge, want %s untouched", after, closed[0].Path)
				}
			}
		})
	}
}

func TestSplitClosedFilesTrustsOnlyStatisticsThatProveNoOpenVersion(t *testing.T) {
	files := []delta.Add{
		{Path: "closed", Stats: `{"numRecords":3,"nullCount":{"_ds_valid_to":0}}`},
		{Path: "mixed", Stats: `{"numRecords":3,"nullCount":{"_ds_valid_to":1}}`},
		{Path: "open", Stats: `{"numRecords":3,"nullCount":{"_ds_valid_to":3}}`},
		{Path: "no null count of valid-to", Stats: `{"numRecords":3,"nullCount":{"id":0}}`},
		{Path: "no stats"},
		{Path: "unreadable stats", Stats: `{"numRecords":`},
	}
	closed, open := splitClosedFiles(files)
	if len(closed) != 1 || closed[0].Path != "closed" || len(open) != len(files)-1 {
		t.Fatalf("closed %v, open %v; want only the file whose null count of %s is 0 closed", closed, open, ColValidTo)
	}
}
