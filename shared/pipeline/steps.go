package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// stepPlan is how a batch is split into steps, kept in the lake while the
// batch is open so that every attempt at the batch splits it the same way
// even if the configured bounds changed in between.
//
// A plan splits a batch either by key or by parts. By key (KeyCode and
// Bounds set, the usual case): step k takes the events of every part whose
// key's range code (cdc.AppendRangeCode) lies in [Bounds[k-1], Bounds[k]),
// the first and last steps unbounded below and above. By parts (Steps
// set): step k takes the parts Steps[k] whole, for batches with parts
// staged before parts were key-sorted, and for tables without a key.
type stepPlan struct {
	Seq   int64
	Files []string // the batch's file ids, in batch order
	Steps [][]partRef
	// KeyCode is the cdc.RangeCodeVersion the bounds were coded with.
	KeyCode int
	Bounds  [][]byte
	// Copied are the files whose staged parts the last step commits to
	// the history as files (historyCopies), but those a step breaks
	// (cdc.CopyCandidate, brokenCopies); no step writes their rows to the
	// history until one breaks them. Only a plan by key copies files.
	Copied []string
	// CopyFirst marks a plan of an earlier release, whose first step
	// commits the copies, the history's keys having told that every event
	// of them was new to it: an attempt that resumes such a batch finishes
	// it so.
	CopyFirst bool
}

// stepPlanJSON is a plan as kept in the lake. A plan by key writes
// keyPlanSteps as its steps: a release from before key ranges, which reads
// steps as lists of parts, then fails to parse the plan and stops the
// table's merge, instead of reading no step and completing a batch it did
// not apply (a roll back during a batch).
//
// A plan by key that copies files to the history writes lastCopyPlanSteps,
// a list holding a string, which every earlier release fails to parse as
// its steps: a release from before copies would write the copied files'
// rows to the history in every step, and one that copies them in the
// first step (copiedPlanSteps, a string, which this release still
// follows) would copy them after the steps before it left their rows out.
type stepPlanJSON struct {
	Seq     int64           `json:"seq"`
	Files   []string        `json:"files"`
	Steps   json.RawMessage `json:"steps"`
	KeyCode int             `json:"key_code,omitempty"`
	Bounds  [][]byte        `json:"bounds,omitempty"`
	Copied  []string        `json:"copied,omitempty"`
}

const (
	keyPlanSteps      = `{"by":"key range","see":"bounds"}`
	copiedPlanSteps   = `"by key range (see bounds); the first step copies the parts of the copied files to the history"`
	lastCopyPlanSteps = `[["by key range (see bounds); the last step copies the parts of the copied files to the history, but those a step broke: see the seq-broken-step records beside it"]]`
)

func (plan stepPlan) MarshalJSON() ([]byte, error) {
	j := stepPlanJSON{Seq: plan.Seq, Files: plan.Files, KeyCode: plan.KeyCode, Bounds: plan.Bounds, Steps: json.RawMessage(keyPlanSteps)}
	if plan.Bounds != nil && len(plan.Copied) > 0 {
		j.Steps, j.Copied = json.RawMessage(lastCopyPlanSteps), plan.Copied
		if plan.CopyFirst {
			j.Steps = json.RawMessage(copiedPlanSteps)
		}
	}
	if plan.Bounds == nil {
		var err error
		if j.Steps, err = json.Marshal(plan.Steps); err != nil {
			return nil, err
		}
	}
	return json.Marshal(j)
}

func (plan *stepPlan) UnmarshalJSON(b []byte) error {
	var j stepPlanJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*plan = stepPlan{Seq: j.Seq, Files: j.Files, KeyCode: j.KeyCode, Bounds: j.Bounds}
	last := bytes.Equal(j.Steps, []byte(lastCopyPlanSteps))
	if len(j.Steps) > 0 && (j.Steps[0] == '{' || j.Steps[0] == '"') || last { // keyPlanSteps, copiedPlanSteps, lastCopyPlanSteps
		if j.Bounds == nil {
			return errors.New("a plan by key ranges without bounds")
		}
		if j.Steps[0] == '"' || last {
			if len(j.Copied) == 0 {
				return errors.New("a plan that copies files to the history without naming them")
			}
			plan.Copied, plan.CopyFirst = j.Copied, !last
		}
		return nil
	}
	return json.Unmarshal(j.Steps, &plan.Steps)
}

// batchStep is what one step of a batch applies: the events of parts
// whose key lies in span (every event of them when span is nil). Every
// part of a batch split by key is in each of its steps, so that each step
// takes the batch's schema; a step only reads the parts that can hold a
// key of its span.
type batchStep struct {
	parts []batchPart
	span  *cdc.KeySpan
	// copied are the files whose parts the history takes as files
	// (historyCopies): the step leaves their rows out of its history. Of
	// a plan of an earlier release (CopyFirst), copies are the parts the
	// step commits; else candidates are the copied files in plan order,
	// which the last step commits but for those a step broke.
	copied     map[*batchFile]bool
	copies     []batchPart
	candidates []*batchFile
	// through are the keys of the steps up to this one (nil: all).
	through *cdc.KeySpan
}

// stepRangeShare is the share of a step's bound that a key range is cut
// at: the sample a range is sized by counts a part's events to within
// KeyEvery on each side of a cut, so a range sized at the bound itself
// could pass it.
const stepRangeShare = 0.875

// partRef names one staged part of a batch file.
type partRef struct {
	File string `json:"file"` // file id
	Part int    `json:"part"`
}

// stepMemoryBytes bounds the estimated memory of a step's events (the sum
// of its parts' MemBytes) beside batch_max_events: steps of wide rows hold
// fewer events. A part is never split, so a step is at least one part,
// itself bounded by partMemoryBytes at staging.
const stepMemoryBytes = 2 * partMemoryBytes

// stepPlanPath is where the plan of a table's batch is kept.
func stepPlanPath(tableID string, seq int64) string {
	return stagingDir(tableID) + "/_steps/" + strconv.FormatInt(seq, 10) + ".json"
}

// planSteps splits a batch into steps of at most the configured events
// (Config.MaxEvents) and staged bytes (Config.MaxBytes) each, and at most
// stepMemoryBytes of the parts' estimated memory. Memory in a merge is
// proportional to a step's events, whatever the size of a batch or of a
// file. A batch that fits one step is one step and its commits are those
// of a batch without steps. A larger one is split by key ranges sized from
// the parts' key samples (keyBounds): each step holds every event of its
// keys, and the state files a step writes hold keys no later step of the
// batch looks up, so a bulk load in one batch writes each row once. When a
// part has no key sample, the batch is split by parts, in batch order (a
// part larger than a bound is a step of its own). A split into several
// steps is written to the lake before the first step commits, and an
// attempt at a resumed batch that finds a plan for it follows it.
// current is the state table's source schema as the batch found it.
func (p *Pipeline) planSteps(ctx context.Context, tabs cdc.TableSet, b coord.Batch, files []*batchFile, current value.StructType) ([]batchStep, error) {
	ids := make([]string, len(b.Files))
	for i, f := range b.Files {
		ids[i] = f.ID
	}
	byID := map[string]*batchFile{}
	for _, f := range files {
		byID[f.rec.ID] = f
	}
	path := stepPlanPath(tabs.ID, b.Seq)
	// Only an earlier attempt at the batch can have planned it: a batch
	// handed out for the first time has no plan to read (one of another
	// registry's batch of the same number would be ignored anyway, and is
	// replaced below if this batch needs a plan).
	if b.Resumed {
		if plan, ok, err := p.readStepPlan(ctx, path, b.Seq, ids, byID); err != nil {
			return nil, err
		} else if ok {
			return plan.resolve(byID)
		}
	}
	maxEvents, maxBytes := p.Config.MaxEvents(), p.Config.MaxBytes()
	maxMem := orConst(p.stepMemory, stepMemoryBytes)
	plan := stepPlan{Seq: b.Seq, Files: ids}
	var events, size, mem int64
	// Key ranges need every file keyed by the same columns, whose codes
	// the samples are.
	sorted := len(files) > 0 && len(files[0].m.Key) > 0
	for _, f := range files {
		sorted = sorted && slices.EqualFunc(f.m.Key, files[0].m.Key, strings.EqualFold)
		for _, part := range f.m.Parts {
			events, size, mem = events+part.Events, size+part.Add.Size, mem+part.MemBytes
			sorted = sorted && part.keySorted()
		}
	}
	nsteps := 1
	if events > maxEvents || size > maxBytes || mem > maxMem {
		if sorted {
			// Events per step: the tightest of the three bounds, at the
			// batch's average event.
			per := float64(maxEvents)
			if size > 0 {
				per = min(per, float64(maxBytes)*float64(events)/float64(size))
			}
			if mem > 0 {
				per = min(per, float64(maxMem)*float64(events)/float64(mem))
			}
			bounds, largest := keyBounds(files, int64(max(1, per*stepRangeShare)))
			// A range is never cut inside a key: a key with more events
			// than a step holds (a hot row) would make a step past the
			// bound. Steps by parts bound every step, and apply such a
			// key's events over several, each against the table as the
			// one before left it.
			if float64(largest) <= per {
				plan.KeyCode, plan.Bounds = cdc.RangeCodeVersion, bounds
				nsteps = len(plan.Bounds) + 1
			} else {
				sorted = false
			}
		}
		if !sorted {
			plan.Steps = partSteps(files, maxEvents, maxBytes, maxMem)
			nsteps = len(plan.Steps)
		}
	}
	if nsteps == 1 {
		plan.KeyCode, plan.Bounds, plan.Steps = 0, nil, nil
	}
	if nsteps == 1 || plan.Bounds != nil {
		copied, err := p.historyCopies(ctx, tabs, files, current)
		if err != nil {
			return nil, err
		}
		for _, f := range files { // in batch order, as the plan keeps them
			if copied[f.rec.ID] {
				plan.Copied = append(plan.Copied, f.rec.ID)
			}
		}
	}
	if nsteps > 1 {
		body, err := json.Marshal(plan)
		if err != nil {
			return nil, err
		}
		_, err = p.Lake.Write(ctx, path, bytes.NewReader(body), objstore.WriteOptions{IfAbsent: true, ContentType: "application/json"})
		if errors.Is(err, objstore.ErrExists) {
			// Another attempt planned the batch meanwhile: follow it.
			if plan, ok, err := p.readStepPlan(ctx, path, b.Seq, ids, byID); err != nil || ok {
				if err != nil {
					return nil, err
				}
				return plan.resolve(byID)
			}
			// A stale plan of other files under this number: replace it.
			_, err = p.Lake.Write(ctx, path, bytes.NewReader(body), objstore.WriteOptions{ContentType: "application/json"})
		}
		if err != nil {
			return nil, fmt.Errorf("write the step plan of batch %d: %w", b.Seq, err)
		}
		p.log().Info("batch merged in steps", "event", "steps", "table", tabs.ID, "batch", b.Seq, "steps", nsteps, "by_key", plan.Bounds != nil, "events", events, "max_events", maxEvents, "files_copied_to_history", len(plan.Copied))
	}
	return plan.resolve(byID)
}

// readStepPlan reads the plan of batch seq, if one was written for the same
// files and parts. A plan of other files or parts (a registry started again
// from nothing reusing sequence numbers) is ignored.
func (p *Pipeline) readStepPlan(ctx context.Context, path string, seq int64, ids []string, byID map[string]*batchFile) (stepPlan, bool, error) {
	body, err := objstore.ReadAll(ctx, p.Lake, path)
	if errors.Is(err, objstore.ErrNotExist) {
		return stepPlan{}, false, nil
	}
	if err != nil {
		return stepPlan{}, false, fmt.Errorf("read the step plan of batch %d: %w", seq, err)
	}
	var plan stepPlan
	if err := json.Unmarshal(body, &plan); err != nil {
		return stepPlan{}, false, fmt.Errorf("parse the step plan %s: %w", path, err)
	}
	if plan.Seq != seq || len(plan.Files) != len(ids) {
		return stepPlan{}, false, nil
	}
	for i := range ids {
		if plan.Files[i] != ids[i] {
			return stepPlan{}, false, nil
		}
	}
	if plan.Bounds != nil && plan.KeyCode != cdc.RangeCodeVersion {
		// Its steps committed so far split the keys by other codes:
		// splitting the rest anew could apply an event twice or never.
		return stepPlan{}, false, fmt.Errorf("the step plan %s splits batch %d by range codes of version %d, and this release codes keys by version %d: finish the batch with the release that planned it", path, seq, plan.KeyCode, cdc.RangeCodeVersion)
	}
	for _, refs := range plan.Steps {
		for _, r := range refs {
			if f, ok := byID[r.File]; ok && (r.Part < 0 || r.Part >= len(f.m.Parts)) {
				return stepPlan{}, false, nil
			}
		}
	}
	return plan, true, nil
}

// resolve maps the plan to the batch's parts; parts of files quarantined
// since the plan was made are left out.
func (plan stepPlan) resolve(byID map[string]*batchFile) ([]batchStep, error) {
	steps, err := plan.resolveParts(byID)
	if err != nil || len(plan.Copied) == 0 || len(steps) == 0 || plan.Steps != nil {
		return steps, err
	}
	copied := map[*batchFile]bool{}
	var candidates []*batchFile
	for _, id := range plan.Copied {
		if _, ok := byID[id]; !ok && !plan.CopyFirst {
			// Its rows of the steps applied so far are in no history
			// commit yet, and a quarantined file's parts are not read.
			return nil, fmt.Errorf("the step plan of batch %d copies file %s to the history in its last step, and the file was quarantined since: replay it (dsdelta replay) once the batch is rolled back, or restore its record", plan.Seq, id)
		}
		if f, ok := byID[id]; ok {
			copied[f] = true
			candidates = append(candidates, f)
			if plan.CopyFirst {
				for i := range f.m.Parts {
					steps[0].copies = append(steps[0].copies, batchPart{file: f, part: i})
				}
			}
		}
	}
	for k := range steps {
		steps[k].copied = copied
		if !plan.CopyFirst {
			steps[k].candidates = candidates
		}
	}
	return steps, nil
}

// resolveParts is resolve without the copies.
func (plan stepPlan) resolveParts(byID map[string]*batchFile) ([]batchStep, error) {
	if plan.Steps == nil {
		var all []batchPart
		for _, id := range plan.Files {
			if f, ok := byID[id]; ok {
				for i := range f.m.Parts {
					all = append(all, batchPart{file: f, part: i})
				}
			}
		}
		out := make([]batchStep, len(plan.Bounds)+1)
		for k := range out {
			out[k].parts = all
			if len(plan.Bounds) > 0 {
				var lo, hi []byte
				if k > 0 {
					lo = plan.Bounds[k-1]
				}
				if k < len(plan.Bounds) {
					hi = plan.Bounds[k]
				}
				out[k].span = cdc.NewKeySpan(lo, hi)
				out[k].through = cdc.NewKeySpan(nil, hi)
			}
		}
		return out, nil
	}
	out := make([]batchStep, len(plan.Steps))
	for k, refs := range plan.Steps {
		for _, r := range refs {
			f, ok := byID[r.File]
			if !ok {
				continue
			}
			if r.Part < 0 || r.Part >= len(f.m.Parts) {
				return nil, fmt.Errorf("step plan of batch %d names part %d of file %s, which has %d", plan.Seq, r.Part, r.File, len(f.m.Parts))
			}
			out[k].parts = append(out[k].parts, batchPart{file: f, part: r.Part})
		}
	}
	return out, nil
}

// partSteps splits a batch's parts, in batch order, into steps within the
// bounds; a part larger than a bound is a step of its own.
func partSteps(files []*batchFile, maxEvents, maxBytes, maxMem int64) [][]partRef {
	var steps [][]partRef
	var cur []partRef
	var events, size, mem int64
	for _, f := range files {
		for i, part := range f.m.Parts {
			if len(cur) > 0 && (events+part.Events > maxEvents || size+part.Add.Size > maxBytes || mem+part.MemBytes > maxMem) {
				steps, cur, events, size, mem = append(steps, cur), nil, 0, 0, 0
			}
			cur = append(cur, partRef{File: f.rec.ID, Part: i})
			events += part.Events
			size += part.Add.Size
			mem += part.MemBytes
		}
	}
	if len(cur) > 0 {
		steps = append(steps, cur)
	}
	return steps
}

// keyBounds cuts the key space of a batch's key-sorted parts into ranges
// of about per events each, by the parts' samples of range codes: a
// sampled code stands for the KeyEvery events of its part that follow it.
// A range is never cut inside one key, so a key with more events than per
// makes a larger range; largest is the estimated events of the largest.
func keyBounds(files []*batchFile, per int64) (bounds [][]byte, largest int64) {
	type point struct {
		code   []byte
		events int64
	}
	var points []point
	for _, f := range files {
		for _, part := range f.m.Parts {
			for j, c := range part.KeySample {
				points = append(points, point{c, min(part.KeyEvery, part.Events-int64(j)*part.KeyEvery)})
			}
		}
	}
	slices.SortStableFunc(points, func(a, b point) int { return bytes.Compare(a.code, b.code) })
	var acc int64
	for _, pt := range points {
		if acc > 0 && acc+pt.events > per && (len(bounds) == 0 || !bytes.Equal(pt.code, bounds[len(bounds)-1])) {
			bounds, acc = append(bounds, pt.code), 0
		}
		acc += pt.events
		largest = max(largest, acc)
	}
	return bounds, largest
}

// spanEvents estimates how many of the part's events lie in span, for a
// step to size what it reads: by the part's key sample when it is sorted,
// a quarter of its events otherwise. Changes are large, and a step takes a
// twelfth of each part of a bulk load.
func (part stagedPart) spanEvents(span *cdc.KeySpan) int64 {
	if !part.keySorted() {
		return part.Events / 4
	}
	in := int64(1)
	for _, code := range part.KeySample {
		if span.Contains(code) {
			in++
		}
	}
	est := in * part.KeyEvery
	return min(part.Events, est+est/8+64)
}

// mayHold reports whether a key-sorted part can hold a key of span: its
// first and last keys' codes leave room for one. The part's codes are of
// its own key types: they only say so when the step reads its keys as
// values of the same kinds (sameKeyKinds).
func (part stagedPart) mayHold(span *cdc.KeySpan) bool {
	if span == nil || !part.keySorted() {
		return true
	}
	return span.Overlaps(part.KeySample[0], part.KeyMax)
}

// sameKeyKinds reports whether the key columns of a part's schema and of a
// step's have types whose values code alike as range codes: the same
// type, integers of any width, or floats of any width. A key column cast
// to another kind (schema mode overwrite) codes otherwise.
func sameKeyKinds(part, step value.StructType, key []string) bool {
	for _, k := range key {
		a, okA := part.Field(k)
		b, okB := step.Field(k)
		if !okA || !okB {
			return false
		}
		if value.Equal(a.Type, b.Type) {
			continue
		}
		pa, _ := a.Type.(value.Primitive)
		pb, _ := b.Type.(value.Primitive)
		ints := value.IntegerBits(pa) > 0 && value.IntegerBits(pb) > 0
		floats := (pa == value.Float || pa == value.Double) && (pb == value.Float || pb == value.Double)
		if !ints && !floats {
			return false
		}
	}
	return true
}

// dropStepPlan deletes a completed batch's plan, if it had one, and the
// records of the history copies its steps broke (by step).
func (p *Pipeline) dropStepPlan(ctx context.Context, tableID string, seq int64, broken map[int]string) {
	if err := p.Lake.Delete(ctx, stepPlanPath(tableID, seq)); err != nil && !errors.Is(err, objstore.ErrNotExist) {
		p.log().Warn("could not delete a completed batch's step plan", "table", tableID, "batch", seq, "error", err)
	}
	for _, name := range broken {
		if err := p.Lake.Delete(ctx, name); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			p.log().Warn("could not delete a completed batch's record of broken history copies", "table", tableID, "batch", seq, "record", name, "error", err)
		}
	}
}
