package cdc

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// dvFiles lists the deletion vector files in store.
func dvFiles(t *testing.T, ctx context.Context, store objstore.Store) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := store.List(ctx, "", "", func(info objstore.Info) error {
		if strings.HasSuffix(info.Name, ".bin") && strings.Contains(info.Name, "deletion_vector_") {
			out[info.Name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// liveDVFiles lists the DV files the live files of store reference.
func liveDVFiles(t *testing.T, ctx context.Context, store objstore.Store) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range stateSnapshot(t, ctx, store).Files() {
		if f.DeletionVector != nil {
			name, err := f.DeletionVector.StoragePath()
			if err != nil {
				t.Fatal(err)
			}
			out[name] = true
		}
	}
	return out
}

// TestMaintenanceOfAStateTableTheMergeGaveDeletionVectors: the vectors the
// merge writes are folded by compaction (clustered by key), survive more
// merges, a rebuild and a vacuum, and at each step the state equals the
// model and verifies against its history.
func TestMaintenanceOfAStateTableTheMergeGaveDeletionVectors(t *testing.T) {
	m := newModelRun(t, dvOptions())
	ctx := m.ctx
	m.apply(1, seedEvents(2000))
	rng := rand.New(rand.NewPCG(11, 11))
	n := uint64(10_000)
	seq := int64(2)
	merge := func(batches int) {
		for range batches {
			m.apply(seq, scattered(rng, &n, 40, 2200))
			seq++
		}
		m.check()
	}
	merge(4)
	if len(liveDVFiles(t, ctx, m.tabs.State)) == 0 {
		t.Fatal("the merge wrote no deletion vector")
	}

	t.Run("compaction folds every vector past a small share", func(t *testing.T) {
		snap := stateSnapshot(t, ctx, m.tabs.State)
		var withDV int
		for _, f := range snap.Files() {
			if f.DeletionVector != nil {
				withDV++
			}
		}
		res, err := snap.Optimize(ctx, delta.OptimizeOptions{TargetFileBytes: 1 << 14, ClusterBy: ClusterColumns(snap), MaxDeletedShare: 1e-9})
		if err != nil {
			t.Fatal(err)
		}
		if res.DeletionVectorsPurged != withDV || res.RowsPurged == 0 {
			t.Fatalf("result %+v, want all %d vectors purged", res, withDV)
		}
		if left := liveDVFiles(t, ctx, m.tabs.State); len(left) != 0 {
			t.Fatalf("vectors left after compaction: %v", left)
		}
		m.check()
	})

	t.Run("merges after compaction write vectors again", func(t *testing.T) {
		merge(3)
		if len(liveDVFiles(t, ctx, m.tabs.State)) == 0 {
			t.Fatal("no vector after the compaction")
		}
	})

	t.Run("vacuum keeps the live vectors and deletes the others", func(t *testing.T) {
		if len(dvFiles(t, ctx, m.tabs.State)) <= len(liveDVFiles(t, ctx, m.tabs.State)) {
			t.Fatal("no DV file is unreferenced before vacuum: the test would prove nothing")
		}
		later := time.Now().Add(30 * 24 * time.Hour)
		if _, err := delta.Open(m.tabs.State).Vacuum(ctx, delta.VacuumOptions{Now: func() time.Time { return later }}); err != nil {
			t.Fatal(err)
		}
		live, stored := liveDVFiles(t, ctx, m.tabs.State), dvFiles(t, ctx, m.tabs.State)
		if len(stored) != len(live) {
			t.Errorf("%d DV files stored, %d referenced", len(stored), len(live))
		}
		for name := range live {
			if !stored[name] {
				t.Errorf("vacuum deleted the live DV file %s", name)
			}
		}
		m.check()
	})

	t.Run("rebuild recreates the state without vectors", func(t *testing.T) {
		vr, err := Rebuild(ctx, m.tabs, 0)
		if err != nil || !vr.OK() {
			t.Fatalf("rebuild: %v %+v", err, vr)
		}
		if left := liveDVFiles(t, ctx, m.tabs.State); len(left) != 0 {
			t.Fatalf("vectors left after rebuild: %v", left)
		}
		m.check()
	})
}
