package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// stepPlan is how a batch is split into steps, kept in the lake while the
// batch is open so that every attempt at the batch splits it the same way
// even if the configured bounds changed in between.
type stepPlan struct {
	Seq   int64       `json:"seq"`
	Files []string    `json:"files"` // the batch's file ids, in batch order
	Steps [][]partRef `json:"steps"`
}

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

// planSteps splits a batch's staged parts, in batch order, into steps of
// at most the configured events (Config.MaxEvents) and staged bytes
// (Config.MaxBytes) each, and at most stepMemoryBytes of the parts'
// estimated memory; a part larger than a bound is a step of its own.
// Memory in a merge is proportional to a step's events, whatever the size
// of a batch or of a file. A batch that fits one step (the usual case:
// NextBatch forms batches within the same bounds) is one step and its
// commits are those of a batch without steps. A split into several steps
// is written to the lake before the first step commits, and an attempt
// that finds a plan for the batch follows it.
func (p *Pipeline) planSteps(ctx context.Context, tabs cdc.TableSet, b coord.Batch, files []*batchFile) ([][]batchPart, error) {
	ids := make([]string, len(b.Files))
	for i, f := range b.Files {
		ids[i] = f.ID
	}
	byID := map[string]*batchFile{}
	for _, f := range files {
		byID[f.rec.ID] = f
	}
	path := stepPlanPath(tabs.ID, b.Seq)
	if plan, ok, err := p.readStepPlan(ctx, path, b.Seq, ids, byID); err != nil {
		return nil, err
	} else if ok {
		return plan.resolve(byID)
	}
	maxEvents, maxBytes := p.Config.MaxEvents(), p.Config.MaxBytes()
	var steps [][]partRef
	var cur []partRef
	var events, size, mem int64
	maxMem := orConst(p.stepMemory, stepMemoryBytes)
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
	plan := stepPlan{Seq: b.Seq, Files: ids, Steps: steps}
	if len(steps) > 1 {
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
		p.log().Info("batch merged in steps", "event", "steps", "table", tabs.ID, "batch", b.Seq, "steps", len(steps), "max_events", maxEvents)
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
	for _, refs := range plan.Steps {
		for _, r := range refs {
			if f, ok := byID[r.File]; ok && (r.Part < 0 || r.Part >= len(f.m.Parts)) {
				return stepPlan{}, false, nil
			}
		}
	}
	return plan, true, nil
}

// resolve maps the plan's references to the batch's parts; parts of files
// quarantined since the plan was made are left out.
func (plan stepPlan) resolve(byID map[string]*batchFile) ([][]batchPart, error) {
	out := make([][]batchPart, len(plan.Steps))
	for k, refs := range plan.Steps {
		for _, r := range refs {
			f, ok := byID[r.File]
			if !ok {
				continue
			}
			if r.Part < 0 || r.Part >= len(f.m.Parts) {
				return nil, fmt.Errorf("step plan of batch %d names part %d of file %s, which has %d", plan.Seq, r.Part, r.File, len(f.m.Parts))
			}
			out[k] = append(out[k], batchPart{file: f, part: r.Part})
		}
	}
	return out, nil
}

// dropStepPlan deletes a completed batch's plan, if it had one.
func (p *Pipeline) dropStepPlan(ctx context.Context, tableID string, seq int64) {
	if err := p.Lake.Delete(ctx, stepPlanPath(tableID, seq)); err != nil && !errors.Is(err, objstore.ErrNotExist) {
		p.log().Warn("could not delete a completed batch's step plan", "table", tableID, "batch", seq, "error", err)
	}
}
