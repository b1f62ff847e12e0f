package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/bench/internal/backfillbench"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// Boundedness of a step's lag (issue 31 item 3).
const (
	// lagBound is the highest p99 of a bounded step, and how long after
	// its last file a step's files may take to be merged.
	lagBound = 10 * time.Second
	// growthFactor and growthFloor: a step's lag grows when the median of
	// its last third of files is more than growthFactor times that of its
	// first third and more than growthFloor above it (below a second,
	// twice is the noise of one pass more or less).
	growthFactor = 2
	growthFloor  = time.Second
)

// lagVerdict is the lag of one step's files and whether it stayed
// bounded.
type lagVerdict struct {
	p50, p99, max         time.Duration
	firstThird, lastThird time.Duration // medians
	bounded               bool
	why                   string // what made it unbounded
}

// judgeLags decides whether a step's lag stayed bounded, from the lags of
// its files in the order they were written and the count of its files
// not merged within lagBound of its last one: every file merged in time,
// p99 ≤ lagBound, and the lag not growing from the first third of the
// step to the last.
func judgeLags(lags []time.Duration, unmerged int) lagVerdict {
	var v lagVerdict
	if len(lags) > 0 {
		sorted := slices.Sorted(slices.Values(lags))
		v.p50, v.p99, v.max = percentile(sorted, 50), percentile(sorted, 99), sorted[len(sorted)-1]
		third := max(1, len(lags)/3)
		v.firstThird = percentile(slices.Sorted(slices.Values(lags[:third])), 50)
		v.lastThird = percentile(slices.Sorted(slices.Values(lags[len(lags)-third:])), 50)
	}
	switch {
	case len(lags) == 0:
		v.why = "no file merged"
	case unmerged > 0:
		v.why = fmt.Sprintf("%d files not merged %s after the last was written", unmerged, lagBound)
	case v.p99 > lagBound:
		v.why = fmt.Sprintf("p99 over %s", lagBound)
	case v.lastThird > growthFactor*v.firstThird && v.lastThird-v.firstThird > growthFloor:
		v.why = fmt.Sprintf("growing: median %.0f ms in the last third, %.0f ms in the first", ms(v.lastThird), ms(v.firstThird))
	default:
		v.bounded = true
	}
	return v
}

// percentile is the nearest-rank p-th percentile of sorted values.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(0, i)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// lagTracker times each file from when it was put in place to the commit
// of the batch that merged it.
type lagTracker struct {
	mu      sync.Mutex
	placed  map[string]placedFile // not merged yet
	lags    map[int][]lagSample   // merged files, by step
	merged  []string              // merged files the producer has not removed yet
	batches int                   // batches completed
	unknown int                   // files merged that no step placed
}

type placedFile struct {
	at   time.Time
	step int
}

type lagSample struct {
	placed time.Time
	lag    time.Duration
}

func newLagTracker() *lagTracker {
	return &lagTracker{placed: map[string]placedFile{}, lags: map[int][]lagSample{}}
}

func (t *lagTracker) place(name string, at time.Time, step int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.placed[name] = placedFile{at, step}
}

// committed records the files of a batch whose commits landed at at.
func (t *lagTracker) committed(files []coord.FileRecord, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.batches++
	for _, f := range files {
		p, ok := t.placed[f.Name]
		if !ok {
			t.unknown++
			continue
		}
		delete(t.placed, f.Name)
		t.lags[p.step] = append(t.lags[p.step], lagSample{p.at, at.Sub(p.at)})
		t.merged = append(t.merged, f.Name)
	}
}

// takeMerged returns the files merged since the last call.
func (t *lagTracker) takeMerged() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.merged
	t.merged = nil
	return m
}

// unmerged counts the files of a step not merged yet.
func (t *lagTracker) unmerged(step int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.placed {
		if p.step == step {
			n++
		}
	}
	return n
}

// stepLags are the lags of a step's merged files, in the order they were
// placed.
func (t *lagTracker) stepLags(step int) []time.Duration {
	t.mu.Lock()
	s := slices.Clone(t.lags[step])
	t.mu.Unlock()
	slices.SortFunc(s, func(a, b lagSample) int { return a.placed.Compare(b.placed) })
	out := make([]time.Duration, len(s))
	for i, x := range s {
		out[i] = x.lag
	}
	return out
}

func (t *lagTracker) completedBatches() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.batches
}

// trackedBatches is the pipeline's Batches, telling the tracker of each
// batch completed: the batch's files and its CommittedAt, which the merge
// takes right after the batch's last commit, the current-state table's
// (cdc commits the history, the tombstones, then the state). That is when
// the batch's events became visible, read without polling.
type trackedBatches struct {
	pipeline.Batches
	t *lagTracker
}

func (b trackedBatches) CompleteBatch(ctx context.Context, l coord.Lease, batch coord.Batch, stats coord.BatchStats) error {
	if err := b.Batches.CompleteBatch(ctx, l, batch, stats); err != nil {
		return err
	}
	at := stats.CommittedAt
	if at.IsZero() {
		at = time.Now()
	}
	b.t.committed(batch.Files, at)
	return nil
}

// lastCommit is when the last of a step's merged files was committed.
func (t *lagTracker) lastCommit(step int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, x := range t.lags[step] {
		if at := x.placed.Add(x.lag); at.After(last) {
			last = at
		}
	}
	return last
}

// pending counts the files put in place and not merged yet, of any step.
func (t *lagTracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.placed)
}

// unknownFiles counts the merged files no step put in place.
func (t *lagTracker) unknownFiles() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unknown
}

// The phases of the loop's merging: waiting for files, a merge (under the
// table's lease) and the table's maintenance (from the lease's release to
// the end of the merging pass). Staging runs beside them.
const (
	phaseIdle = iota
	phaseMerge
	phaseMaintain
	phases
)

// loopPhases splits the wall time and the process's CPU time between the
// phases of the loop's merging, as the loop and its lease tell it which
// one it is in. The CPU time of the whole process is counted (staging's,
// beside merging, and the producer's thread's, a few hundredths of a
// core), so a phase's is the process's while merging is in it.
type loopPhases struct {
	mu        sync.Mutex
	cpu, wall [phases]time.Duration
	phase     int
	since     time.Time
	sinceCPU  time.Duration
	// owed: the last maintenance run left compaction for the next.
	owed  bool
	maint maintStats
}

// maintStats sums the loop's maintenance runs.
type maintStats struct {
	runs    int
	longest time.Duration
	folded  int // files rewritten without the rows their vectors marked
}

// maintained counts a maintenance run that has ended; merging waits
// from then until its next merge or maintenance.
func (l *loopPhases) maintained(r pipeline.MaintainResult) {
	l.mu.Lock()
	l.owed = r.CompactionLeftFiles > 0
	l.maint.runs++
	l.maint.longest = max(l.maint.longest, r.Duration)
	l.maint.folded += r.DeletionVectorsFolded
	l.mu.Unlock()
	l.enter(phaseIdle)
}

// takeMaint returns the maintenance runs counted since the last call.
func (l *loopPhases) takeMaint() maintStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.maint
	l.maint = maintStats{}
	return m
}

// settled reports whether merging waits with no compaction owed.
func (l *loopPhases) settled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase == phaseIdle && !l.owed
}

// enter ends the phase under way and starts phase.
func (l *loopPhases) enter(phase int) {
	now, cpu := time.Now(), backfillbench.CPUTime()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.since.IsZero() {
		l.wall[l.phase] += now.Sub(l.since)
		l.cpu[l.phase] += cpu - l.sinceCPU
	}
	l.phase, l.since, l.sinceCPU = phase, now, cpu
}

// totals are the CPU and wall times of each phase so far, the phase under
// way's to now.
func (l *loopPhases) totals() (cpu, wall [phases]time.Duration) {
	now, c := time.Now(), backfillbench.CPUTime()
	l.mu.Lock()
	defer l.mu.Unlock()
	cpu, wall = l.cpu, l.wall
	if !l.since.IsZero() {
		wall[l.phase] += now.Sub(l.since)
		cpu[l.phase] += c - l.sinceCPU
	}
	return cpu, wall
}

// phasedLeaser is the pipeline's Leaser, telling the phases when a merge
// takes the table's lease and when it gives it up.
type phasedLeaser struct {
	pipeline.Leaser
	phases *loopPhases
}

func (l phasedLeaser) Acquire(ctx context.Context, tableID, holder string, ttl time.Duration) (coord.Lease, error) {
	l.phases.enter(phaseMerge)
	return l.Leaser.Acquire(ctx, tableID, holder, ttl)
}

func (l phasedLeaser) Release(ctx context.Context, lease coord.Lease) error {
	err := l.Leaser.Release(ctx, lease)
	l.phases.enter(phaseMaintain)
	return err
}
