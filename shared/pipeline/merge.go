package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/opcount"
	"github.com/dsdelta/dsdelta/shared/value"
)

// MergeResult sums what MergeTable did.
type MergeResult struct {
	Table       string
	Batches     int
	Files       int
	Quarantined int
	Result      cdc.Result // counters summed over batches; versions of the last
	Busy        bool       // another holder has the lease
	Remaining   bool       // stopped by the budget with work left (re-woken)
	// Steps counts the commit sets of the batches: a batch larger than the
	// configured events is merged in several steps (see planSteps).
	Steps int
	// StagedRowsRead counts the rows of staged parts the batches decoded:
	// each event once, when a batch is one step or its key-range steps
	// hand on what they decoded for the next (see partCarry).
	StagedRowsRead int64
	// Ops counts the billable calls of the whole call (see package
	// opcount): its batches', the lease's and the look for work left.
	Ops opcount.Counts
}

// completeTimeout bounds completing a batch whose commits have landed,
// which the merge's own context no longer cuts short.
const completeTimeout = 30 * time.Second

// MergeTable takes the table's lease and merges batches of staged files
// until none is pending or the budget runs out. The lease is renewed while
// work runs; losing it cancels the work before its next commit, and the
// table is woken again for what is left. After releasing, it looks for
// files staged meanwhile so no wake-up is lost.
func (p *Pipeline) MergeTable(ctx context.Context, tableID string) (MergeResult, error) {
	return p.mergeTable(ctx, tableID, p.MergeBudget)
}

// mergeTable is MergeTable with the budget given (0: none) instead of
// p.MergeBudget.
func (p *Pipeline) mergeTable(ctx context.Context, tableID string, budget time.Duration) (res MergeResult, err error) {
	res = MergeResult{Table: tableID}
	ctx, ops := opcount.Start(ctx)
	defer func() { res.Ops = ops.Counts() }()
	// Load validates a file's configuration; one built in code is checked
	// here, before anything is written.
	if err := p.Config.Validate(); err != nil {
		return res, fmt.Errorf("config: %w", err)
	}
	tabs, err := p.TableSet(tableID)
	if err != nil {
		return res, err
	}
	// The arrays staging keeps for its next file would sit in the memory
	// the merge's steps are sized to have (a process that stages files,
	// then merges them: dsdelta run).
	p.valueArrays.Drop()
	start := p.now()
	log := p.log().With("table", tableID)
	for {
		more, err := p.mergeUnderLease(ctx, tabs, start, budget, &res)
		if errors.Is(err, coord.ErrLeaseHeld) {
			res.Busy = true
			log.Info("another merge holds the table", "event", "busy")
			return res, nil
		}
		if errors.Is(err, coord.ErrLeaseLost) && p.Waker != nil {
			// Lost by expiry (a renewal that came too late) as much as to
			// a takeover: the wake-ups that came while the lease was held
			// were answered busy, so with nobody holding it now the
			// pending files would wait for the scheduled safety net. A
			// wake-up costs a holder that took over a busy answer.
			if werr := p.Waker.Wake(context.WithoutCancel(ctx), tableID); werr != nil {
				return res, fmt.Errorf("merge %s: lease lost (%v), and the wake-up for what is left failed: %w", tableID, err, werr)
			}
		}
		if err != nil {
			return res, err
		}
		if !more {
			return res, nil
		}
		// Files were staged while we released: merge them now, or hand
		// them to the next invocation when the budget is spent.
		if budget > 0 && p.now().Sub(start) > budget/2 {
			res.Remaining = true
			if p.Waker != nil {
				if err := p.Waker.Wake(ctx, tableID); err != nil {
					return res, fmt.Errorf("merge %s: re-wake: %w", tableID, err)
				}
			}
			return res, nil
		}
	}
}

// mergeUnderLease runs batches under one lease; more reports pending work
// found after the release.
func (p *Pipeline) mergeUnderLease(ctx context.Context, tabs cdc.TableSet, start time.Time, budget time.Duration, res *MergeResult) (more bool, err error) {
	ttl := p.leaseTTL()
	lease, err := p.Leaser.Acquire(ctx, tabs.ID, p.holder(), ttl)
	if err != nil {
		return false, err
	}
	log := p.log().With("table", tabs.ID, "lease", lease.Token)
	// The lease's batches read the table's logs at every step: each read
	// after the first reads only the commits since (the three tables'
	// snapshots are kept until the lease ends).
	tabs.Snapshots = &delta.Snapshots{}
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	var mu sync.Mutex // guards current, renewed in the background
	current := lease
	held := func() coord.Lease {
		mu.Lock()
		defer mu.Unlock()
		return current
	}
	go func() { // renew at a third of the TTL; a lost lease stops the work
		defer close(renewed)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-workCtx.Done():
				return
			case <-t.C:
				l, err := p.Leaser.Renew(workCtx, held(), ttl)
				if err != nil {
					if workCtx.Err() == nil {
						log.Warn("lease lost; stopping before the next commit", "error", err)
						cancel(fmt.Errorf("%w: %v", coord.ErrLeaseLost, err))
					}
					return
				}
				mu.Lock()
				current = l
				mu.Unlock()
			}
		}
	}()
	stopRenew := func() Lease {
		cancel(nil)
		<-renewed
		return held()
	}
	// abandon gives the lease up after a failure, so the retry (or another
	// instance) resumes the open batch at once instead of after the TTL.
	// A lost lease makes Release fail, which is fine.
	abandon := func() {
		_ = p.Leaser.Release(context.WithoutCancel(ctx), stopRenew())
	}
	budgetLeft := func() bool {
		return budget <= 0 || p.now().Sub(start) < budget*3/4
	}
	for budgetLeft() {
		// A batch is not bounded by events: batch_max_events bounds what
		// a merge holds at once, and a batch with more is merged in key
		// ranges of at most that many (planSteps), each row of a bulk load
		// written once. Files and bytes bound the work of one batch.
		// Each batch counts its own calls, forming it included.
		batchCtx, batchOps := opcount.Start(workCtx)
		b, err := p.Batches.NextBatch(batchCtx, held(), tabs.ID, coord.BatchLimits{Files: p.Config.MaxFiles(), Bytes: p.Config.MaxBytes(), SourceBytes: p.Config.MaxSourceBytes()})
		if errors.Is(err, coord.ErrNoWork) {
			break
		}
		if err != nil {
			abandon()
			return false, leaseErr(workCtx, fmt.Errorf("merge %s: next batch: %w", tabs.ID, err))
		}
		r, counts, err := p.applyBatch(batchCtx, tabs, b)
		if err != nil {
			abandon()
			return false, leaseErr(workCtx, fmt.Errorf("merge %s batch %d: %w", tabs.ID, b.Seq, err))
		}
		// The batch's commits have landed: completing it is a few writes
		// that a stop must not cut short, or the batch would be resumed
		// and its merge left uncounted. A holder that lost the lease is
		// still refused by its fencing token, checked in those writes.
		doneCtx, doneCancel := context.WithTimeout(context.WithoutCancel(batchCtx), completeTimeout)
		err = p.Batches.CompleteBatch(doneCtx, held(), b, coord.BatchStats{
			StateVersion: r.StateVersion, HistoryVersion: r.HistoryVersion, CommittedAt: p.now(),
			Events: r.Events, Inserted: r.Inserted, Updated: r.Updated, Deleted: r.Deleted + r.Buried, Stale: r.Stale,
		})
		doneCancel()
		if err != nil {
			abandon()
			return false, leaseErr(workCtx, fmt.Errorf("merge %s batch %d: complete: %w", tabs.ID, b.Seq, err))
		}
		if counts.steps > 1 || b.Resumed { // only then can there be a plan
			p.dropStepPlan(ctx, tabs.ID, b.Seq, counts.brokenRecords)
		}
		res.Batches++
		res.Steps += counts.steps
		res.Files += len(b.Files) - counts.quarantined
		res.Quarantined += counts.quarantined
		res.StagedRowsRead += counts.stagedRows
		res.Result.Add(r)
		log.Info("batch merged", append([]any{"event", "merged", "batch", b.Seq, "files", len(b.Files), "events", r.Events,
			"inserted", r.Inserted, "updated", r.Updated, "deleted", r.Deleted, "stale", r.Stale,
			"state_version", r.StateVersion, "history_version", r.HistoryVersion, "history_files_copied", r.HistoryFilesCopied,
			"staged_rows_read", counts.stagedRows, "steps", counts.steps, "lag_seconds", p.now().Sub(maxSource(b)).Seconds()},
			batchOps.Counts().Attrs()...)...)
	}
	final := stopRenew()
	if err := p.Leaser.Release(ctx, final); err != nil && !errors.Is(err, coord.ErrLeaseLost) {
		return false, fmt.Errorf("merge %s: release: %w", tabs.ID, err)
	}
	pending, err := p.Registry.Pending(ctx, tabs.ID, 1)
	if err != nil {
		return false, fmt.Errorf("merge %s: check pending: %w", tabs.ID, err)
	}
	return len(pending) > 0, nil
}

// Lease is coord.Lease, named here for readability of the renew loop.
type Lease = coord.Lease

func leaseErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, coord.ErrLeaseLost) {
		return fmt.Errorf("%w (%v)", cause, err)
	}
	return err
}

func maxSource(b coord.Batch) time.Time {
	var t time.Time
	for _, f := range b.Files {
		if f.MaxSourceTime.After(t) {
			t = f.MaxSourceTime
		}
	}
	return t
}

// batchFile is a file of a batch with its manifest and its parts' source
// schemas.
type batchFile struct {
	rec  coord.FileRecord
	m    *manifest
	srcs []value.StructType // per part
}

// batchPart is one staged part of a batch file.
type batchPart struct {
	file *batchFile
	part int
}

func (bp batchPart) staged() stagedPart       { return bp.file.m.Parts[bp.part] }
func (bp batchPart) source() value.StructType { return bp.file.srcs[bp.part] }

// applyBatch applies a batch's staged files in steps of bounded memory
// (see planSteps). Files whose schema conflicts with the table are
// quarantined and left out; the decision only depends on column types,
// which merge mode never changes, so a re-run of the batch leaves out the
// same files.
func (p *Pipeline) applyBatch(ctx context.Context, tabs cdc.TableSet, b coord.Batch) (cdc.Result, batchCounts, error) {
	none := cdc.Result{HistoryVersion: -1, StateVersion: -1, TombstoneVersion: -1}
	var counts batchCounts
	// The state table as the first step finds it: its schema checks the
	// batch's files, and its log is read once for both (a new table's
	// first batch, which finds no log, waited for two reads of none).
	current, rowsBefore, err := p.tableState(ctx, tabs)
	if err != nil {
		return none, counts, err
	}
	files, quarantined, err := p.batchFiles(ctx, tabs, b, current)
	counts.quarantined = quarantined
	if err != nil || len(files) == 0 {
		return none, counts, err
	}
	steps, err := p.planSteps(ctx, tabs, b, files, current)
	if err != nil {
		return none, counts, err
	}
	ids := make([]string, len(b.Files))
	for i, f := range b.Files {
		ids[i] = f.ID
	}
	broken, err := p.loadBrokenCopies(ctx, tabs.ID, batchIDs{b.Seq, ids}, b.Resumed && len(steps[0].candidates) > 0)
	if err != nil {
		return none, counts, err
	}
	counts.brokenRecords = broken.records // the map, which the steps add to
	total := none
	bad := map[*batchFile]bool{} // quarantined while applying a step
	carry := map[string]*partCarry{}
	arrays := &stepArrays{}
	for k, st := range steps {
		step := cdc.Step{Seq: b.Seq, Chunk: k, Last: k == len(steps)-1}
		if k > 0 { // the step before changed the table
			if current, _, err = p.tableState(ctx, tabs); err != nil {
				counts.quarantined, counts.steps = quarantined+len(bad), k
				return total, counts, err
			}
		}
		idx, live := liveCandidates(st, broken, k)
		sr := p.readStep(ctx, tabs, st, current, bad, carry, arrays, idx)
		for _, r := range sr.read {
			counts.stagedRows += r.rowsRead
		}
		copies := stepCopies{live: live}
		if len(steps) > 1 { // the last step needs no record: no step follows it
			copies.onBroken = func(ctx context.Context, ids []string) error { return p.recordBroken(ctx, broken, k, ids) }
		}
		r, err := p.applyStep(ctx, tabs, b, step, st, sr, bad, arrays, copies)
		if err != nil {
			counts.quarantined, counts.steps = quarantined+len(bad), k
			return total, counts, err
		}
		if r.HistoryVersion < 0 { // nothing left in this step
			r.HistoryVersion, r.StateVersion, r.TombstoneVersion = total.HistoryVersion, total.StateVersion, total.TombstoneVersion
		}
		total.Add(r)
		if len(steps) > 1 {
			p.log().Info("batch step merged", "event", "step", "table", tabs.ID, "batch", b.Seq, "step", k+1, "steps", len(steps),
				"parts", len(st.parts), "events", r.Events, "history_version", r.HistoryVersion, "state_version", r.StateVersion)
		}
	}
	if len(steps) > 1 {
		// Each step rewrites a share of the table; the batch is judged
		// whole (a batch of one step is judged by cdc).
		cdc.RecommendDV(ctx, p.log(), tabs.ID, total.RowsSpareable, rowsBefore, cdc.DefaultRecommendDVShare)
	}
	counts.quarantined, counts.steps = quarantined+len(bad), len(steps)
	return total, counts, nil
}

// stepArrays are the arrays of changes a batch's steps read and gather
// their changes in, reused from step to step: a bulk load's steps are
// alike, and a new array for each part and step, then one for the step
// (tens of MB a step), were as many fresh pages to fault in and collect.
type stepArrays struct {
	step []cdc.Change // a step's changes, gathered (applyStep)
	mu   sync.Mutex
	free [][]cdc.Change // empty arrays for the parts' changes (readPart)
}

// get returns an empty array of room for n changes at least.
func (a *stepArrays) get(n int64) []cdc.Change {
	a.mu.Lock()
	var s []cdc.Change
	if k := len(a.free); k > 0 {
		s, a.free = a.free[k-1], a.free[:k-1]
	}
	a.mu.Unlock()
	return slices.Grow(s, int(n))
}

// put takes back an array of changes that are no longer needed.
func (a *stepArrays) put(s []cdc.Change) {
	if cap(s) == 0 {
		return
	}
	clear(s) // the rows they hold are garbage once written
	a.mu.Lock()
	a.free = append(a.free, s[:0])
	a.mu.Unlock()
}

// batchCounts are what applying a batch counts besides cdc's result.
type batchCounts struct {
	quarantined int   // files quarantined
	steps       int   // commit sets
	stagedRows  int64 // rows of staged parts decoded
	// brokenRecords name the records of broken history copies the batch
	// has beside its plan (brokenCopies), by step.
	brokenRecords map[int]string
}

// stepCopies are a step's live history copy candidates (liveCandidates),
// and what records the ones it breaks.
type stepCopies struct {
	live     []*batchFile
	onBroken func(ctx context.Context, ids []string) error
}

// batchFiles reads the manifests of the batch's files that are not
// quarantined and, in schema mode merge, quarantines the files with a part
// whose schema conflicts with the table's (its source schema source) and
// the batch's earlier files'.
func (p *Pipeline) batchFiles(ctx context.Context, tabs cdc.TableSet, b coord.Batch, source value.StructType) ([]*batchFile, int, error) {
	overwrite := p.Config.Table(tabs.ID).SchemaMode == config.SchemaOverwrite
	var files []*batchFile
	quarantined := 0
next:
	for _, rec := range b.Files {
		if rec.State == coord.StateQuarantined {
			quarantined++
			continue
		}
		m, err := p.readStaged(ctx, rec.StagedPath)
		if err != nil {
			return nil, 0, err
		}
		bf := &batchFile{rec: rec, m: m}
		accepted := source
		for _, part := range m.Parts {
			hs, err := value.ParseSchema(part.Schema)
			if err != nil {
				return nil, 0, fmt.Errorf("staged %s: %w", rec.StagedPath, err)
			}
			src := cdc.SourceSchema(hs)
			bf.srcs = append(bf.srcs, src)
			if overwrite {
				continue // casting never conflicts
			}
			merged, _, err := cdc.MergeSchemas(accepted, withoutUntyped(src, part.Untyped))
			if err != nil {
				if err := p.quarantineInBatch(ctx, tabs, b, rec, err); err != nil {
					return nil, 0, err
				}
				quarantined++
				continue next
			}
			accepted = merged
		}
		source = accepted
		files = append(files, bf)
	}
	return files, quarantined, nil
}

// tableState is the current-state table's source schema (empty before the
// table exists), once its mode is checked against the configuration's, and
// its number of rows (0 before it exists, or when its adds do not say).
func (p *Pipeline) tableState(ctx context.Context, tabs cdc.TableSet) (value.StructType, int64, error) {
	snap, err := tabs.Snapshots.Latest(ctx, delta.Open(tabs.State))
	if errors.Is(err, delta.ErrNotATable) {
		return value.StructType{}, 0, nil
	}
	if err != nil {
		return value.StructType{}, 0, err
	}
	// A table built in another mode is refused before the batch reads,
	// quarantines or writes anything.
	if err := cdc.CheckMode(snap, tabs.ID, cdc.Mode(p.Config.Table(tabs.ID).Mode)); err != nil {
		return value.StructType{}, 0, err
	}
	rows, _ := snap.NumRecords()
	return cdc.SourceSchema(snap.Schema()), rows, nil
}

// quarantineInBatch quarantines a file of an open batch whose content
// cannot join the table.
func (p *Pipeline) quarantineInBatch(ctx context.Context, tabs cdc.TableSet, b coord.Batch, rec coord.FileRecord, cause error) error {
	reason := fmt.Sprintf("%s: %v (table %s)", rec.Name, cause, tabs.ID)
	if _, err := p.Registry.Quarantine(ctx, rec, reason); err != nil {
		return err
	}
	p.log().Warn("file quarantined", "event", "quarantined", "table", tabs.ID, "file", rec.Name, "batch", b.Seq, "reason", reason)
	return nil
}

// stepRead is a step's staged parts read into changes, in the step's
// source schema.
type stepRead struct {
	source value.StructType
	key    []string
	keyIdx []int
	read   []partChanges // per part of the step
	err    error
}

// readStep reads a step's staged parts (the events of its key span) on
// all cores, each into its own changes, on a table of source schema
// current. A part's failure does not cancel the others: a value that does
// not fit quarantines one file (applyStep), and the step goes on with the
// rest.
//
// carry holds, per staged part, what the previous step of the batch decoded
// past its span (see partCarry); readStep replaces it with this step's.
//
// candidate numbers the step's live history copy candidates (from 1).
func (p *Pipeline) readStep(ctx context.Context, tabs cdc.TableSet, st batchStep, current value.StructType, bad map[*batchFile]bool, carry map[string]*partCarry, arrays *stepArrays, candidate map[*batchFile]int32) stepRead {
	r := p.stepSchema(ctx, tabs, st.parts, current)
	if r.err != nil {
		return r
	}
	overwrite := p.Config.Table(tabs.ID).SchemaMode == config.SchemaOverwrite
	r.read = make([]partChanges, len(st.parts))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, bp := range st.parts {
		// A part's codes and key bounds only tell where its keys lie
		// when the step reads them as values of the same kinds.
		prune := sameKeyKinds(bp.source(), r.source, r.key)
		if bad[bp.file] || prune && !bp.staged().mayHold(st.span) {
			continue
		}
		in := carry[bp.staged().Add.Path]
		g.Go(func() error {
			// A candidate a step broke is read as any file.
			hist := histMark{inHistory: st.copied[bp.file] && (st.candidates == nil || candidate[bp.file] > 0), candidate: candidate[bp.file]}
			r.read[i] = p.readPart(ctx, bp, r.source, r.key, r.keyIdx, overwrite, st.span, prune, hist, in, arrays)
			return nil
		})
	}
	_ = g.Wait() // each part's outcome is in r.read, handled in order by applyStep
	clear(carry)
	budget := carryBudget{events: p.Config.MaxEvents() / carryShare, mem: orConst(p.stepMemory, stepMemoryBytes) / carryShare}
	for i, bp := range st.parts {
		if c := r.read[i].carry; c != nil {
			budget.take(c, bp.staged())
			carry[bp.staged().Add.Path] = c
			r.read[i].carry = nil
		}
	}
	return r
}

// carryShare bounds what the steps of a batch hand on (see partCarry) at
// this share of a step's events and estimated memory. A batch of many
// small parts would otherwise hold, between two steps, the rest of a row
// group of each part: more than a step's own events.
const carryShare = 2

// carryBudget is what is left of the bound on a step's carries.
type carryBudget struct{ events, mem int64 }

// take counts c's rows against the budget, or drops them when they do not
// fit: the next step then reads the part's rows again from its span (the
// part stays open).
func (b *carryBudget) take(c *partCarry, part stagedPart) {
	n := int64(len(c.rows))
	mem := n * part.MemBytes / max(1, part.Events)
	if n > b.events || mem > b.mem {
		c.rows, c.codes, c.from = nil, codeList{}, 0
		return
	}
	b.events, b.mem = b.events-n, b.mem-mem
}

// partCarry is what reading a key-sorted part for one key-range step of a
// batch decoded for the steps after it: the rows of its last row group
// read whose keys lie past the step's span, and the position of the first
// row it did not decode. The part's row groups straddle the steps' bounds,
// and without it each step decoded again the row group the step before it
// ended in: about a third more rows than the batch holds, at 50k events a
// part and 100k a step.
//
// A carry is a cache of one merge run: a run that resumes a batch after a
// crash starts without one, and reads as a first step does.
type partCarry struct {
	source    value.StructType // the step schema the rows were read in
	inHistory bool
	file      *delta.OpenedFile // the part, opened once for the batch's steps
	from      int64             // ReadOptions.FromRow of the next read
	rows      [][]any           // as read, in file (key) order
	codes     codeList          // their range codes
}

func (c *partCarry) add(code []byte, row []any) {
	c.rows = append(c.rows, row)
	c.codes.buf = append(c.codes.buf, code...)
	c.codes.mark()
}

// stepSchema is the source schema (and key) of a step of these parts on a
// table of source schema current.
func (p *Pipeline) stepSchema(ctx context.Context, tabs cdc.TableSet, parts []batchPart, current value.StructType) stepRead {
	r := stepRead{source: current}
	overwrite := p.Config.Table(tabs.ID).SchemaMode == config.SchemaOverwrite
	for _, bp := range parts {
		if len(bp.file.m.Key) > 0 {
			r.key = bp.file.m.Key
		}
		if overwrite {
			continue
		}
		// batchFiles checked the batch as a whole in this order, and the
		// table has taken at most the schemas of earlier steps since.
		merged, _, err := cdc.MergeSchemas(r.source, withoutUntyped(bp.source(), bp.staged().Untyped))
		if err != nil {
			r.err = fmt.Errorf("staged %s: %w", bp.file.rec.StagedPath, err)
			return r
		}
		r.source = merged
	}
	if overwrite {
		staged := make([]stagedPart, len(parts))
		for i, bp := range parts {
			staged[i] = bp.staged()
		}
		newest, err := p.newestPart(ctx, staged)
		if err != nil {
			r.err = err
			return r
		}
		// The schema as of the step's newest change, not of its last
		// arrival: files come in any order. The engine keeps the table's
		// schema when it already holds a newer change's. Columns the part
		// only guessed (null throughout) keep the current type.
		r.source = overwriteSchema(current, parts[newest].source(), staged[newest].Untyped)
	}
	if len(r.key) > 0 {
		var err error
		if r.keyIdx, err = cdc.KeyIndexes(r.source, r.key); err != nil {
			r.err = err
		}
	}
	return r
}

// applyStep applies a step's read parts as one cdc step. A part whose
// values do not fit the step's schema quarantines its file, and the file's
// other parts are left out from then on (bad).
//
// The changes are gathered in arrays.step; the parts' arrays go back to
// arrays, emptied.
func (p *Pipeline) applyStep(ctx context.Context, tabs cdc.TableSet, b coord.Batch, step cdc.Step, st batchStep, sr stepRead, bad map[*batchFile]bool, arrays *stepArrays, copies stepCopies) (cdc.Result, error) {
	parts := st.parts
	none := cdc.Result{HistoryVersion: -1, StateVersion: -1, TombstoneVersion: -1}
	if sr.err != nil {
		return none, sr.err
	}
	tc := p.Config.Table(tabs.ID)
	overwrite := tc.SchemaMode == config.SchemaOverwrite
	read := sr.read
	batch := cdc.Batch{Source: sr.source, Key: sr.key}
	for i, bp := range parts {
		if r := read[i]; r.convErr != nil && !bad[bp.file] {
			if slices.Contains(copies.live, bp.file) {
				// Planned as a copy, its schema is the step's: nothing
				// to convert. Quarantining it would lose the rows of
				// the steps before from the history.
				return none, fmt.Errorf("staged %s, planned as a history copy, does not fit the step's schema: %w", bp.staged().Add.Path, r.convErr)
			}
			// A value that does not fit the widened column: the file
			// cannot join the table, the rest of the batch goes on. Its
			// parts merged by earlier steps of the batch stay merged; its
			// parts in this step are all left out, as a re-run (which
			// finds the file quarantined) leaves them out.
			if err := p.quarantineInBatch(ctx, tabs, b, bp.file.rec, r.convErr); err != nil {
				return none, err
			}
			bad[bp.file] = true
		}
	}
	n := 0
	for i, bp := range parts {
		if r := read[i]; r.err != nil && r.convErr == nil && !bad[bp.file] {
			return none, fmt.Errorf("read staged %s: %w", bp.staged().Add.Path, r.err)
		}
		if !bad[bp.file] {
			n += len(read[i].changes)
		}
	}
	batch.Changes = slices.Grow(arrays.step[:0], n)
	for i, bp := range parts {
		if !bad[bp.file] {
			batch.Changes = append(batch.Changes, read[i].changes...)
		}
		arrays.put(read[i].changes)
		read[i].changes = nil
	}
	defer func() {
		clear(batch.Changes) // the rows they hold are garbage once written
		arrays.step = batch.Changes[:0]
	}()
	for _, bp := range st.copies {
		if !bad[bp.file] {
			batch.HistoryFiles = append(batch.HistoryFiles, p.historyFile(bp))
		}
	}
	if len(copies.live) > 0 {
		batch.Candidates, batch.OnBroken = p.copyCandidates(st, copies.live), copies.onBroken
	}
	if len(batch.Changes) == 0 && len(batch.HistoryFiles) == 0 && (!step.Last || len(batch.Candidates) == 0) {
		return none, nil // every part left out: nothing to commit
	}
	dvMin := tc.DVMinFileBytes
	if p.dvMinFileBytes != 0 {
		dvMin = p.dvMinFileBytes
	}
	return cdc.ApplyStep(ctx, tabs, step, batch, cdc.Options{TargetFileBytes: tc.TargetFileBytes, Now: p.now, Logger: p.log(),
		StatePartitionColumns: tc.PartitionColumns, Overwrite: overwrite, Mode: cdc.Mode(tc.Mode),
		DeletionVectors: tc.DeletionVectors == config.On, DVMinFileBytes: dvMin})
}

// histMark is how a part's changes are marked for the history: InHistory,
// and the number of the copy candidate they are of (0: none).
type histMark struct {
	inHistory bool
	candidate int32
}

// partChanges is what reading one staged part gave.
type partChanges struct {
	changes  []cdc.Change
	err      error
	convErr  error      // a value that does not fit the step's schema (also in err)
	carry    *partCarry // for the next step, when it can take one
	rowsRead int64      // rows decoded
}

// readPart reads a staged part's rows as changes in the step's source
// schema: those whose key lies in span, when set. Of a key-sorted part only
// the row groups whose first key column's bounds overlap the span are read,
// when prune says its bounds are of the kind the step's keys are.
// hist marks the changes as those of a file the batch copies to the
// history. in, when set, is what the step before this one left of the
// part (see partCarry): its rows are taken first, and the read starts past
// them.
func (p *Pipeline) readPart(ctx context.Context, bp batchPart, source value.StructType, key []string, keyIdx []int, overwrite bool, span *cdc.KeySpan, prune bool, hist histMark, in *partCarry, arrays *stepArrays) partChanges {
	var out partChanges
	part := bp.staged()
	hs := cdc.HistorySchema(source)
	fromSchema := cdc.HistorySchema(bp.source())
	md := part.metadata()
	same := value.Equal(fromSchema, hs) // the usual case: rows are read as they are
	// The rows become the changes (of a key-sorted part, those another
	// step takes are the rows of at most two row groups).
	ro := delta.ReadOptions{KeepRows: true}
	// A part the history takes as a file is read for the state alone:
	// only the columns a change is made of (cdc.StateChange).
	stateOnly := hist.inHistory && same && len(key) > 0
	if stateOnly {
		ro.Columns = cdc.StateChangeColumns(source)
	}
	var code []byte
	var hKey []int // the key's columns in the rows read
	var keyVals []any
	var share int64 // the part's estimated events in span
	if span != nil && len(key) > 0 {
		var err error
		if hKey, err = cdc.KeyIndexes(hs, key); err != nil {
			out.err = err
			return out
		}
		if stateOnly {
			for i, j := range keyIdx {
				hKey[i] = cdc.StateChangeOffset + j
			}
		}
		keyVals = make([]any, len(hKey))
		if idx, err := cdc.KeyIndexes(fromSchema, key[:1]); err == nil && part.keySorted() && prune {
			ro.RowGroupFilter = span.RowGroupFilter(fromSchema.Fields[idx[0]].Name)
		}
		share = part.spanEvents(span)
		out.changes = arrays.get(share)
	} else {
		out.changes = arrays.get(part.Events)
	}
	changes := cdc.NewHistoryChanges()
	take := func(h []any) error {
		var c cdc.Change
		var err error
		if stateOnly {
			c, err = changes.StateChange(h, source, keyIdx)
		} else {
			c, err = changes.Change(h, source, keyIdx)
		}
		if err != nil {
			return err
		}
		c.InHistory, c.Candidate = hist.inHistory, hist.candidate
		out.changes = append(out.changes, c)
		return nil
	}
	// A key-sorted part read by key range leaves the rows it decoded past
	// the span to the next step (partCarry), and takes those the step
	// before left it: when the step takes at least half a large row group
	// of it. Of a part of which steps take less (a batch of many small
	// parts, whose row groups are small, see partGroupRows), what a step
	// would hand on is most of a row group, held over several steps with
	// the part open, for a few rows each; such parts' row groups are read
	// again.
	var next *partCarry
	if ro.RowGroupFilter != nil && same && share >= orConst(int64(p.stagedGroupRows), stagedRowGroupRows)/2 {
		next = &partCarry{source: source, inHistory: hist.inHistory}
		if in != nil {
			next.file = in.file
		}
		if next.file == nil {
			f, err := delta.OpenFile(ctx, p.Lake, part.Add)
			if err != nil {
				out.err = err
				return out
			}
			next.file = f
		}
		ro.Opened = next.file
		if in != nil && in.inHistory == hist.inHistory && value.Equal(in.source, source) {
			for i, row := range in.rows {
				switch c := in.codes.code(int32(i)); {
				case span.Contains(c):
					if err := take(row); err != nil {
						out.err = err
						out.changes = nil
						return out
					}
				case span.Past(c):
					next.add(c, row)
				}
			}
			ro.FromRow = in.from
		}
		next.from = ro.FromRow
	}
	expect := int64(-1) // the position of the next row of the row group being read
	out.err = delta.ReadFileAt(ctx, p.Lake, md, part.Add, ro, func(pos int64, row []any) error {
		out.rowsRead++
		if next != nil {
			if expect >= 0 && pos != expect {
				// A row group skipped between two read (a part not
				// sorted as its bounds say): the next step reads
				// the part again from its span.
				next = nil
			} else {
				expect, next.from = pos+1, pos+1
			}
		}
		var h []any
		switch {
		case same:
			h = row
		case overwrite:
			h = cdc.ConformCast(row, fromSchema, hs)
		default:
			var err error
			if h, err = cdc.Conform(row, fromSchema, hs); err != nil {
				out.convErr = err
				return err
			}
		}
		if len(key) == 0 {
			out.changes = append(out.changes, cdc.Change{History: h, InHistory: hist.inHistory, Candidate: hist.candidate})
			return nil
		}
		if hKey != nil {
			for i, j := range hKey {
				keyVals[i] = h[j]
			}
			var err error
			if code, err = cdc.AppendRangeCode(code[:0], keyVals); err != nil {
				return err
			}
			if !span.Contains(code) {
				if next != nil && span.Past(code) {
					next.add(code, h)
				}
				return nil // another step's
			}
		}
		return take(h)
	})
	if out.err != nil {
		out.changes = nil
		return out
	}
	out.carry = next
	return out
}

// newestPart returns the index of the part holding the greatest ordering
// key (the later one on a tie, e.g. a file written again under a new
// generation). Manifests record each part's greatest key; for one staged
// before they did, only the order column of the staged file is read.
func (p *Pipeline) newestPart(ctx context.Context, parts []stagedPart) (int, error) {
	best, bestOrder := 0, []byte(nil)
	for i, part := range parts {
		if part.MaxOrder != nil {
			if bestOrder == nil || bytes.Compare(part.MaxOrder, bestOrder) >= 0 {
				best, bestOrder = i, part.MaxOrder
			}
			continue
		}
		md := part.metadata()
		err := delta.ReadFile(ctx, p.Lake, md, part.Add, delta.ReadOptions{Columns: []string{cdc.ColOrder}}, func(row []any) error {
			if o, _ := row[0].([]byte); bestOrder == nil || bytes.Compare(o, bestOrder) >= 0 {
				best, bestOrder = i, o
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("read the orders of staged %s: %w", part.Add.Path, err)
		}
	}
	return best, nil
}

// withoutUntyped drops from a staged file's schema the columns whose type
// was only guessed (null in every record of a JSON file): the table's type,
// or another file's values, decide it. Their values are all null, so
// nothing is lost whichever type the column ends up with.
func withoutUntyped(src value.StructType, untyped []string) value.StructType {
	return dropColumns(src, untyped)
}

// overwriteSchema is the batch schema in schema mode "overwrite": the
// file's columns, except that a column the file only guessed (null in every
// record) keeps the table's current type, or is left out when the table
// has none.
func overwriteSchema(current, src value.StructType, untyped []string) value.StructType {
	guessed := map[string]bool{}
	for _, u := range untyped {
		guessed[strings.ToLower(u)] = true
	}
	var out value.StructType
	for _, f := range src.Fields {
		if guessed[strings.ToLower(f.Name)] {
			cur, ok := current.Field(f.Name)
			if !ok {
				continue
			}
			f.Type = cur.Type
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}
