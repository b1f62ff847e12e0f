package pipeline

import (
	"context"
	"errors"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"

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
//   - none of its events is delivered twice in the batch, which the
//     parts' key hashes tell without reading rows, nor is in the history
//     already, which each step's lookup tells of the step's keys
//     (cdc.CopyCandidate): a step that finds one writes the file's rows
//     instead;
//   - the whole file is copied, so that a file quarantined part-way
//     through a batch cannot have a part in the history: a file's parts
//     are all copied or none is.
//
// The last step of a batch copies them in its history commit, and every
// step leaves their rows out of its own until one breaks them; the plan
// names the candidate files, and a step that breaks one records it beside
// the plan before its history commit (brokenCopies), so that an attempt
// that resumes the batch follows both.

// historyCopyMinEvents is the fewest events of a file whose parts a merge
// copies to the history. Encoding a few hundred rows costs less than
// reading and writing an object does on a bucket, and a batch of small
// CDC files, the merges whose latency matters, then reads no key hashes
// and none of the history's keys.
const historyCopyMinEvents = 4096

// historyCopies returns the ids of the batch's files whose parts the
// history takes as files (none for a table in schema mode overwrite,
// whose rows a batch casts). current is the state table's source schema.
func (p *Pipeline) historyCopies(ctx context.Context, tabs cdc.TableSet, files []*batchFile, current value.StructType) (map[string]bool, error) {
	if len(files) == 0 || p.Config.Table(tabs.ID).SchemaMode == config.SchemaOverwrite || p.noHistoryCopies {
		return nil, nil
	}
	// A batch without a file large enough (CDC's usual one) reads nothing.
	minEvents := orConst(p.historyCopyEvents, historyCopyMinEvents)
	if !slices.ContainsFunc(files, func(f *batchFile) bool { return f.m.Events >= minEvents }) {
		return nil, nil
	}
	// The schema the batch's history commit writes in: the state's and
	// every part's (stepSchema), which must be the history's as it is.
	want := current
	var err error
	for _, f := range files {
		for i, part := range f.m.Parts {
			if want, _, err = cdc.MergeSchemas(want, withoutUntyped(f.srcs[i], part.Untyped)); err != nil {
				return nil, nil // the steps report it
			}
		}
	}
	snap, err := tabs.Snapshots.Latest(ctx, delta.Open(tabs.History))
	switch {
	case errors.Is(err, delta.ErrNotATable):
		// The batch creates it, in the history's schema.
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
		if err := p.dropShared(ctx, files, ok); err != nil {
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

// dropShared clears ok for the files with an event whose key and order
// (cdc.KeyOrderHash) another event of the batch also has; every part of
// the batch must have its hashes, else no file is copied.
func (p *Pipeline) dropShared(ctx context.Context, files []*batchFile, ok map[string]bool) error {
	var owner []string // file id per run
	var parts []stagedPart
	for _, f := range files {
		for _, part := range f.m.Parts {
			parts, owner = append(parts, part), append(owner, f.rec.ID)
		}
	}
	runs := make([][]uint64, len(parts))
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
	for _, r := range collidingRuns(runs) {
		ok[owner[r]] = false
	}
	return nil
}

// collidingRuns returns the runs (sorted slices) holding a value that is
// also in another run or twice in their own, by merging them; in order.
// The values are hashes, spread evenly: a batch of many (a bulk load's
// million keys) is merged in ranges of values on all cores, an equal value
// never lying in two ranges.
func collidingRuns(runs [][]uint64) []int {
	total := 0
	for _, run := range runs {
		total += len(run)
	}
	ranges := 1
	if total >= collideRangeValues {
		ranges = min(runtime.GOMAXPROCS(0), 8)
	}
	// starts[k][r] is where range k begins in run r.
	starts := make([][]int, ranges+1)
	for k := range starts {
		starts[k] = make([]int, len(runs))
		for r, run := range runs {
			switch k {
			case 0:
			case ranges:
				starts[k][r] = len(run)
			default:
				starts[k][r], _ = slices.BinarySearch(run, uint64(k)*(math.MaxUint64/uint64(ranges)))
			}
		}
	}
	hit := make([][]bool, ranges)
	var wg sync.WaitGroup
	for k := range ranges {
		wg.Go(func() { hit[k] = collideRange(runs, starts[k], starts[k+1]) })
	}
	wg.Wait()
	var out []int
	for r := range runs {
		if slices.ContainsFunc(hit, func(h []bool) bool { return h[r] }) {
			out = append(out, r)
		}
	}
	return out
}

// collideRangeValues is the fewest values collidingRuns merges on more
// than one core.
const collideRangeValues = 1 << 16

// collideRange merges runs[r][from[r]:to[r]] of every run, and marks the
// runs holding a value twice over them.
func collideRange(runs [][]uint64, from, to []int) []bool {
	hit := make([]bool, len(runs))
	type head struct {
		v          uint64 // runs[r][i]
		r, i, stop int
	}
	h := make([]head, 0, len(runs))
	for r, run := range runs {
		if from[r] < to[r] {
			h = append(h, head{v: run[from[r]], r: r, i: from[r], stop: to[r]})
		}
	}
	down := func(i int) {
		for {
			m := 2*i + 1
			if m >= len(h) {
				return
			}
			if c := m + 1; c < len(h) && h[c].v < h[m].v {
				m = c
			}
			if h[m].v >= h[i].v {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	prev, prevRun := uint64(0), -1
	for len(h) > 0 {
		top := &h[0]
		if prevRun >= 0 && top.v == prev {
			hit[prevRun], hit[top.r] = true, true
		}
		prev, prevRun = top.v, top.r
		if top.i++; top.i < top.stop {
			top.v = runs[top.r][top.i]
		} else {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		down(0)
	}
	return hit
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
