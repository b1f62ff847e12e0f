package coordtest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// unknownID is the id of a source object nobody recorded.
func unknownID(n int) string {
	return coord.FileID("source", fmt.Sprintf("never/seen/file-%05d.jsonl", n), 1)
}

// wantFiles checks that got holds exactly the records of want, by id.
func wantFiles(t *testing.T, got, want map[string]coord.FileRecord) {
	t.Helper()
	if missing, extra := keysNotIn(want, got), keysNotIn(got, want); len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("Files returned %d records: %d missing %.3q..., %d unknown ids present %.3q...", len(got), len(missing), missing, len(extra), extra)
	}
	for id, w := range want {
		if g := got[id]; g.ID != id || g.Table != w.Table || g.State != w.State || g.ArrivalSeq != w.ArrivalSeq || g.Name != w.Name {
			t.Fatalf("Files[%s] = %s in %s (arrival %d), want %s in %s (arrival %d)", id, g.State, g.Table, g.ArrivalSeq, w.State, w.Table, w.ArrivalSeq)
		}
	}
}

// keysNotIn returns the keys of a that b lacks, sorted.
func keysNotIn(a, b map[string]coord.FileRecord) []string {
	var out []string
	for id := range a {
		if _, ok := b[id]; !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func testFiles(t *testing.T, newCoordinator NewFunc) {
	t.Run("files returns exactly the known ids across tables and states", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		want := map[string]coord.FileRecord{}
		keep := func(r coord.FileRecord) { want[r.ID] = r }
		l := e.acquire("db.a", "m")
		m := e.register(file("db.a", 1, 10))
		if err := e.c.CompleteBatch(e.ctx, l, e.nextBatch(l, "db.a", coord.BatchLimits{}), coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		keep(e.file(m.ID))
		keep(e.register(file("db.a", 2, 10)))
		keep(e.skip(file("db.a", 3, 10), "no events"))
		e.register(file("db.b", 1, 10))
		keep(e.nextBatch(e.acquire("db.b", "m"), "db.b", coord.BatchLimits{}).Files[0])
		q, err := e.c.Quarantine(e.ctx, file("db.b", 2, 10), "bad")
		if err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		keep(q)
		e.skip(file("db.b", 3, 10), "excluded")
		keep(e.register(file("db.b", 3, 10))) // skipped, then staged again
		keep(e.skip(file(unknownTable, 1, 10), "table unknown"))
		states := map[coord.FileState]int{}
		for _, r := range want {
			states[r.State]++
		}
		if len(states) != 5 {
			t.Fatalf("records in states %v, want every state", states)
		}
		query := slices.Sorted(maps.Keys(want))
		query = append(query, unknownID(1), unknownID(2), query[0]) // unknown ids and a duplicate
		got, err := e.c.Files(e.ctx, query)
		if err != nil {
			t.Fatalf("Files: %v", err)
		}
		wantFiles(t, got, want)
		for _, r := range want {
			got, err := e.c.Files(e.ctx, []string{unknownID(3), r.ID})
			if err != nil {
				t.Fatalf("Files(%s): %v", r.ID, err)
			}
			wantFiles(t, got, map[string]coord.FileRecord{r.ID: r})
		}
	})
	t.Run("files of no ids or only unknown ids is empty", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		e.register(file("db.t", 1, 10))
		for _, query := range [][]string{nil, {unknownID(1), unknownID(2)}} {
			got, err := e.c.Files(e.ctx, query)
			if err != nil || got == nil || len(got) != 0 {
				t.Fatalf("Files(%v) = %v, %v; want an empty map", query, got, err)
			}
		}
	})
	t.Run("files finds the known ids among a thousand", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		const tables, perTable, unknown = 4, 75, 700
		want := map[string]coord.FileRecord{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var errs []error
		for ti := range tables {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tableID := fmt.Sprintf("db.t%d", ti)
				if ti == tables-1 {
					tableID = unknownTable
				}
				for n := 1; n <= perTable; n++ {
					var rec coord.FileRecord
					var err error
					switch {
					case n%5 == 0:
						rec, _, err = e.c.RegisterFile(e.ctx, file(tableID, n, 10))
					case n%7 == 0: // skipped, then staged again
						if _, err = e.c.Skip(e.ctx, file(tableID, n, 10), "excluded"); err == nil {
							rec, _, err = e.c.RegisterFile(e.ctx, file(tableID, n, 10))
						}
					default:
						rec, err = e.c.Skip(e.ctx, file(tableID, n, 10), "no events")
					}
					mu.Lock()
					if err == nil {
						want[rec.ID] = rec
					}
					errs = append(errs, err)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("recording files: %v", err)
		}
		query := slices.Collect(maps.Keys(want))
		for n := range unknown {
			query = append(query, unknownID(n))
		}
		rand.Shuffle(len(query), func(i, j int) { query[i], query[j] = query[j], query[i] })
		got, err := e.c.Files(e.ctx, query)
		if err != nil {
			t.Fatalf("Files of %d ids: %v", len(query), err)
		}
		wantFiles(t, got, want)
	})
}
