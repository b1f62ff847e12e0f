package pipeline

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// WatchMaintainEvery is how often at most Watch maintains a table that
// has files pending again after a merge. RunOnce maintains a table after
// every merge, and so did Watch first: merging again at once after each
// merge, it then made batches so small that maintaining after each took
// the time the merges needed. In the bench's quick sustained scenario (a
// 1M-row table, random updates, deletion vectors), RunOnce passes every
// second held 34,000 and 35,000 events/s with a bounded lag; Watch
// maintaining after every merge, 25,000; Watch maintaining once caught up
// or every 10 s, 46,000, 51,000 and 50,000, with p99 at 43,000 events/s
// of 4.5 s where RunOnce's passes read 9.9 s and growing.
const WatchMaintainEvery = 10 * time.Second

// watchCompactBytes is the most one of Watch's maintenance runs rewrites
// in each Delta table of tableID: one target file, or the table's
// compaction_max_bytes if less. A fold storm (every file of a table
// passing the deleted share within the same minute, as random updates
// make them) or a bulk load's small files are then compacted a slice at a
// time, between merges, instead of in one run during which no file is
// merged. Sliced, the storm costs the same rewriting, spread; when it is
// spread too thin for the update rate, files are folded at a larger
// deleted share, which sets how much the rewriting can keep up with.
func (p *Pipeline) watchCompactBytes(tableID string) int64 {
	tc := p.Config.Table(tableID)
	slice := tc.TargetFileBytes
	if c := tc.CompactionCap(); c > 0 {
		slice = min(slice, c)
	}
	return slice
}

// WatchOptions configures Watch.
type WatchOptions struct {
	// Source, Parallel, Progress and Busy are RunOnce's (Progress, Busy
	// and Report are called one at a time); Wait and Poll are not used: a
	// busy table is tried again at the next merging pass.
	RunOptions
	// Interval is how long staging waits from one pass to the next, and
	// merging for staging to wake it before it looks for pending tables
	// anyway (a second when 0).
	Interval time.Duration
	// Report is told, one call at a time, what each staging or merging
	// pass did (nil: nobody); the sum of the calls is what RunOnce passes
	// would have reported.
	Report func(RunResult)
	// MaintainEvery is how often at most a table with files pending is
	// maintained, and how long at most a merge of it runs before that
	// (0: WatchMaintainEvery).
	MaintainEvery time.Duration
	// Maintaining is told when a maintenance run of a table begins, and
	// Maintained what it did, one call at a time with the others (nil:
	// nobody). A merging pass's Report comes after the maintenance of the
	// tables it merged; the slices run while nothing is pending come
	// after it.
	Maintaining func(tableID string)
	Maintained  func(MaintainResult)
}

// Watch does what RunOnce passes repeated every Interval would, until ctx
// ends (then it returns ctx's error), with staging and merging side by
// side instead of one after the other: staging lists the source and
// stages new files every Interval; merging merges and maintains every table with pending
// work, as soon as staging has registered files and then again at once
// until nothing is pending. So a merge never waits for a listing, nor
// for files staged after it began, and files that arrive during a merge
// are staged meanwhile and merged right after it, as the cloud's onfile
// and merge functions do. While files keep coming, a table is maintained
// about every MaintainEvery: a merge hands over once it has merged that
// long, and the table is maintained unless it was less than that ago.
// Both run in this process, under the coordination the functions use, so
// another process staging or merging the same lake is safe, as with
// RunOnce. Memory is staging's bound plus merging's.
func (p *Pipeline) Watch(ctx context.Context, o WatchOptions) error {
	interval := o.Interval
	if interval <= 0 {
		interval = time.Second
	}
	o.Wait = false
	if o.MaintainEvery <= 0 {
		o.MaintainEvery = WatchMaintainEvery
	}
	// A merge returns once it has merged for MaintainEvery (it starts no
	// batch after three quarters of its budget), so a table whose files
	// never stop coming is maintained all the same.
	o.mergeBudget = o.MaintainEvery * 4 / 3
	// Staging and merging call back from their own goroutines: one call
	// at a time, so the callbacks may share what they update.
	var mu sync.Mutex
	report := func(res RunResult) {
		if o.Report == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		o.Report(res)
	}
	if progress := o.Progress; progress != nil {
		o.Progress = func(sp StageProgress) {
			mu.Lock()
			defer mu.Unlock()
			progress(sp)
		}
	}
	if busy := o.Busy; busy != nil {
		o.Busy = func(st coord.TableStatus) {
			mu.Lock()
			defer mu.Unlock()
			busy(st)
		}
	}
	maintaining, maintained := o.Maintaining, o.Maintained
	o.Maintaining = func(tableID string) {
		if maintaining != nil {
			mu.Lock()
			defer mu.Unlock()
			maintaining(tableID)
		}
	}
	o.Maintained = func(r MaintainResult) {
		if maintained != nil {
			mu.Lock()
			defer mu.Unlock()
			maintained(r)
		}
	}
	// staged wakes merging; one pending wake-up is as good as many.
	staged := make(chan struct{}, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.watchStaging(gctx, o.RunOptions, interval, staged, report) })
	g.Go(func() error { return p.watchMerging(gctx, o, interval, staged, report) })
	err := g.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// watchStaging is Watch's staging: a pass (stageAll) every Interval.
func (p *Pipeline) watchStaging(ctx context.Context, o RunOptions, interval time.Duration, staged chan<- struct{}, report func(RunResult)) error {
	for {
		res := RunResult{Tables: map[string]*TableRun{}}
		if err := p.stageAll(ctx, o, &res); err != nil {
			report(res) // what it staged before
			return err
		}
		if len(res.Files) > 0 {
			report(res)
			select {
			case staged <- struct{}{}:
			default:
			}
		}
		// stageAll lists until a listing finds nothing new, so the next
		// has Interval to find something.
		if err := sleep(ctx, interval, nil); err != nil {
			return err
		}
	}
}

// watchMerging is Watch's merging: a pass (mergePending, then the
// versions) when staging wakes it or Interval has passed, and at once
// again after a pass that merged something, since files may have been
// staged during it. A table merged is maintained when nothing is pending
// for it any more, or when it was last maintained MaintainEvery ago;
// one left for later is maintained at the latest when merging waits.
// Maintenance compacts a slice at a time (watchCompactBytes), and is run
// again, slice after slice, while no file is pending.
func (p *Pipeline) watchMerging(ctx context.Context, o WatchOptions, interval time.Duration, staged <-chan struct{}, report func(RunResult)) error {
	policy := maintainPolicy{every: o.MaintainEvery, last: map[string]time.Time{}, deferred: map[string]bool{}, now: time.Now}
	maintain := func(ctx context.Context, tableID string) error {
		o.Maintaining(tableID)
		r, err := p.maintain(ctx, tableID, p.watchCompactBytes(tableID))
		if err != nil {
			return err
		}
		o.Maintained(r)
		if r.CompactionLeftFiles > 0 {
			policy.leave(tableID)
		}
		return nil
	}
	afterMerge := func(ctx context.Context, tableID string) error {
		st, err := p.Status.Status(ctx, tableID)
		if err != nil {
			return fmt.Errorf("status of %s: %w", tableID, err)
		}
		if policy.later(tableID, st.Pending > 0) {
			return nil
		}
		return maintain(ctx, tableID)
	}
	for {
		res := RunResult{Tables: map[string]*TableRun{}}
		if err := p.mergePending(ctx, o.RunOptions, &res, afterMerge); err != nil {
			report(res) // what it merged before
			return err
		}
		if len(res.Merged) > 0 || len(res.Busy) > 0 {
			err := p.readVersions(ctx, &res)
			report(res)
			if err != nil {
				return err
			}
		}
		if len(res.Merged) > 0 {
			continue
		}
		// Caught up. A table left unmaintained has its maintenance now,
		// should another process have merged what was pending for it,
		// and one whose compaction was left unfinished has another
		// slice, then another while nothing is pending: the next pass
		// merges first whatever staging registered meanwhile.
		for _, tableID := range policy.owed() {
			if err := maintain(ctx, tableID); err != nil {
				return err
			}
		}
		if policy.owes() {
			continue
		}
		if err := sleep(ctx, interval, staged); err != nil {
			return err
		}
	}
}

// maintainPolicy decides when Watch maintains a table it has merged.
type maintainPolicy struct {
	every    time.Duration // 0: WatchMaintainEvery
	last     map[string]time.Time
	deferred map[string]bool // left for later since last maintained
	now      func() time.Time
}

// later reports whether a table just merged, with files pending for it
// (pending) or not, is to be maintained later rather than now; when not,
// it counts the maintenance as done now.
func (m *maintainPolicy) later(tableID string, pending bool) bool {
	every := m.every
	if every <= 0 {
		every = WatchMaintainEvery
	}
	now := m.now()
	if last, ok := m.last[tableID]; pending && ok && now.Sub(last) < every {
		m.deferred[tableID] = true
		return true
	}
	m.last[tableID] = now
	delete(m.deferred, tableID)
	return false
}

// leave records that a table's maintenance left compaction unfinished:
// it is owed another.
func (m *maintainPolicy) leave(tableID string) { m.deferred[tableID] = true }

// owes reports whether some table's maintenance is owed.
func (m *maintainPolicy) owes() bool { return len(m.deferred) > 0 }

// owed returns, in order, the tables whose maintenance was left for later
// and has not been done since, and counts it done now.
func (m *maintainPolicy) owed() []string {
	var out []string
	for tableID := range m.deferred {
		out = append(out, tableID)
	}
	sort.Strings(out)
	now := m.now()
	for _, tableID := range out {
		m.last[tableID] = now
	}
	clear(m.deferred)
	return out
}

// sleep waits for d to pass or wake to receive, and fails only when ctx
// ends first.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-t.C:
	}
	return nil
}
