package pipeline

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
	"golang.org/x/sync/errgroup"
)

// A staged part dated to one source date is written as the history table
// writes its files (cdc.HistoryFile). A merge commits a copy of it to the
// history, instead of decoding and encoding its rows again, when the
// copy holds exactly what the history would have gained from its rows:
//   - its rows are in the history's schema, unchanged by the batch;
//   - none of its events is delivered twice, in the batch or in the
//     history (the re-deliveries the history keeps once), which the parts'
//     key hashes tell without reading rows;
//   - the whole file is copied, so that a file quarantined part-way
//     through a batch cannot have a part in the history: a file's parts
//     are all copied or none is.
//
// A batch in one step copies them in its history commit. A batch in key
// ranges copies them all in its first step's, and every step leaves their
// rows out of its own; the plan names the copied files, so that an attempt
// after the first step's commit, which finds their events in the history,
// still leaves them out.

// historyCopyMinEvents is the fewest events of a file whose parts a merge
// copies to the history. Encoding a few hundred rows costs less than
// reading and writing an object does on a bucket, and a batch of small
// CDC files, the merges whose latency matters, then reads no key hashes
// and none of the history's keys.
const historyCopyMinEvents = 4096

// historyHashLimit bounds the history rows a merge reads the keys of to
// tell that the batch's events are new to the history: a batch whose
// source times overlap more of the history writes its rows, as before.
const historyHashLimit = 4 << 20

// historyCopies returns the ids of the batch's files whose parts the
// history takes as files (none for a table in schema mode overwrite,
// whose rows a batch casts).
func (p *Pipeline) historyCopies(ctx context.Context, tabs cdc.TableSet, files []*batchFile) (map[string]bool, error) {
	if len(files) == 0 || p.Config.Table(tabs.ID).SchemaMode == config.SchemaOverwrite || p.noHistoryCopies {
		return nil, nil
	}
	// A batch without a file large enough (CDC's usual one) reads nothing.
	minEvents := orConst(p.historyCopyEvents, historyCopyMinEvents)
	if !slices.ContainsFunc(files, func(f *batchFile) bool { return f.m.Events >= minEvents }) {
		return nil, nil
	}
	current, err := p.tableSource(ctx, tabs)
	if err != nil {
		return nil, err
	}
	// The schema the batch's history commit writes in: the state's and
	// every part's (stepSchema), which must be the history's as it is.
	want := current
	for _, f := range files {
		for i, part := range f.m.Parts {
			if want, _, err = cdc.MergeSchemas(want, withoutUntyped(f.srcs[i], part.Untyped)); err != nil {
				return nil, nil // the steps report it
			}
		}
	}
	snap, err := delta.Open(tabs.History).Snapshot(ctx)
	switch {
	case errors.Is(err, delta.ErrNotATable):
		snap = nil // the batch creates it
	case err != nil:
		return nil, err
	default:
		if !cdc.TakesFiles(snap.Metadata()) {
			return nil, nil
		}
		have := cdc.SourceSchema(snap.Schema())
		if merged, _, err := cdc.MergeSchemas(have, want); err != nil || !value.Equal(merged, have) {
			return nil, nil // the batch changes the history's schema
		}
		want = have
	}
	key := files[0].m.Key
	ok := map[string]bool{}
	candidates := false
	for _, f := range files {
		if !slices.Equal(f.m.Key, key) {
			return nil, nil
		}
		ok[f.rec.ID] = f.m.Events >= minEvents
		for i, part := range f.m.Parts {
			if !part.dated() || !value.Equal(f.srcs[i], want) || len(key) > 0 && part.KeyHashes == "" {
				ok[f.rec.ID] = false
			}
			if len(key) > 0 && !sameKeyTypes(f.srcs[i], want, key) {
				return nil, nil // a key coded apart from its equal in another part
			}
		}
		candidates = candidates || ok[f.rec.ID]
	}
	if !candidates {
		return nil, nil
	}
	if len(key) > 0 {
		if err := p.dropRedelivered(ctx, snap, files, key, want, ok); err != nil {
			return nil, err
		}
	}
	maps.DeleteFunc(ok, func(_ string, yes bool) bool { return !yes })
	return ok, nil
}

// sameKeyTypes reports whether the key columns have the same types in a
// part's schema as in the batch's.
func sameKeyTypes(part, batch value.StructType, key []string) bool {
	for _, k := range key {
		a, okA := part.Field(k)
		b, okB := batch.Field(k)
		if !okA || !okB || !value.Equal(a.Type, b.Type) {
			return false
		}
	}
	return true
}

// dropRedelivered clears ok for the files with an event whose key and
// order (cdc.KeyOrderHash) another event of the batch also has, or a row
// of the history; every part of the batch must have its hashes, else no
// file is copied. history is the history table (nil before it exists).
func (p *Pipeline) dropRedelivered(ctx context.Context, history *delta.Snapshot, files []*batchFile, key []string, want value.StructType, ok map[string]bool) error {
	var runs [][]uint64
	var owner []string // file id per run
	var parts []stagedPart
	for _, f := range files {
		for _, part := range f.m.Parts {
			parts, owner = append(parts, part), append(owner, f.rec.ID)
		}
	}
	runs = make([][]uint64, len(parts))
	has := make([]bool, len(parts))
	var g errgroup.Group
	g.SetLimit(8) // object reads, not CPU
	for i, part := range parts {
		g.Go(func() error {
			var err error
			runs[i], has[i], err = p.readKeyHashes(ctx, part)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if slices.Contains(has, false) {
		clear(ok)
		return nil
	}
	var lo, hi value.Micros
	first := true
	for _, f := range files {
		if ok[f.rec.ID] {
			if first || f.m.MinSourceTS < lo {
				lo = f.m.MinSourceTS
			}
			if first || f.m.MaxSourceTS > hi {
				hi = f.m.MaxSourceTS
			}
			first = false
		}
	}
	for _, r := range collidingRuns(runs) {
		ok[owner[r]] = false
	}
	if first {
		return nil // no file left to copy
	}
	rows, known, err := cdc.HistoryKeyHashes(ctx, history, key, want, lo, hi, historyHashLimit)
	if err != nil {
		return fmt.Errorf("read the history's keys: %w", err)
	}
	if !known {
		clear(ok)
		return nil
	}
	for r, run := range runs {
		if ok[owner[r]] && intersect(run, rows) {
			ok[owner[r]] = false
		}
	}
	return nil
}

// collidingRuns returns the runs (sorted slices) holding a value that is
// also in another run or twice in their own, by merging them.
func collidingRuns(runs [][]uint64) []int {
	h := &runHeap{runs: runs}
	for r, run := range runs {
		if len(run) > 0 {
			h.items = append(h.items, runItem{r: r})
		}
	}
	heap.Init(h)
	var out []int
	hit := make([]bool, len(runs))
	prev, prevRun, have := uint64(0), -1, false
	for h.Len() > 0 {
		it := h.items[0]
		v := runs[it.r][it.i]
		if have && v == prev {
			for _, r := range []int{prevRun, it.r} {
				if !hit[r] {
					hit[r] = true
					out = append(out, r)
				}
			}
		}
		prev, prevRun, have = v, it.r, true
		if it.i+1 < len(runs[it.r]) {
			h.items[0].i++
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return out
}

type runItem struct{ r, i int }

type runHeap struct {
	runs  [][]uint64
	items []runItem
}

func (h *runHeap) Len() int { return len(h.items) }
func (h *runHeap) Less(a, b int) bool {
	return h.runs[h.items[a].r][h.items[a].i] < h.runs[h.items[b].r][h.items[b].i]
}
func (h *runHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *runHeap) Push(x any)    { h.items = append(h.items, x.(runItem)) }
func (h *runHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return it
}

// intersect reports whether two sorted slices share a value.
func intersect(a, b []uint64) bool {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			return true
		}
	}
	return false
}
