package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// brokenCopies is what the steps of a batch found of its history copy
// candidates (cdc.CopyCandidate): the step that broke each broken one.
// A step that breaks a candidate writes the file's rows of the steps up to
// it in its own history commit, so every step after it must take the file
// as broken, in this attempt or in one that resumes the batch after a
// crash, when no lookup can tell it any more (the tables then record the
// file's events). So a step records the candidates it breaks beside the
// plan before its history commit: <seq>-broken-<step>.json.
//
// A record of a step whose history commit did not happen is written again
// by the step's next attempt, which finds the same (its lookup reads the
// same tables), or removed when that attempt breaks none.
type brokenCopies struct {
	tableID string
	seq     int64
	plan    string         // planDigest of the batch's files
	at      map[string]int // candidate id -> the step that broke it
	records map[int]string // step -> the name of its record, where one exists
}

// brokenRecord is a step's record of the candidates it broke.
type brokenRecord struct {
	Seq   int64    `json:"seq"`
	Step  int      `json:"step"`
	Plan  string   `json:"plan"` // planDigest: a record of another batch of this number is ignored
	Files []string `json:"files"`
}

// planDigest names a batch's files, in order.
func planDigest(ids []string) string {
	h := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	return hex.EncodeToString(h[:8])
}

func brokenPrefix(tableID string, seq int64) string {
	return stagingDir(tableID) + "/_steps/" + strconv.FormatInt(seq, 10) + "-broken-"
}

func brokenPath(tableID string, seq int64, step int) string {
	return brokenPrefix(tableID, seq) + strconv.Itoa(step) + ".json"
}

// loadBrokenCopies returns what the batch's steps recorded so far: nothing
// for a batch handed out for the first time, whose steps have recorded
// nothing, without reading.
func (p *Pipeline) loadBrokenCopies(ctx context.Context, tableID string, b batchIDs, resumed bool) (*brokenCopies, error) {
	bc := &brokenCopies{tableID: tableID, seq: b.seq, plan: planDigest(b.ids), at: map[string]int{}, records: map[int]string{}}
	if !resumed {
		return bc, nil
	}
	prefix := brokenPrefix(tableID, b.seq)
	var names []string
	if err := p.Lake.List(ctx, prefix, "", func(info objstore.Info) error {
		names = append(names, info.Name)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list the broken history copies of batch %d: %w", b.seq, err)
	}
	for _, name := range names {
		body, err := objstore.ReadAll(ctx, p.Lake, name)
		if errors.Is(err, objstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		var r brokenRecord
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		if r.Seq != b.seq || r.Plan != bc.plan || name != brokenPath(tableID, b.seq, r.Step) {
			continue // another batch's of this number
		}
		bc.records[r.Step] = name
		for _, id := range r.Files {
			if k, ok := bc.at[id]; !ok || r.Step < k {
				bc.at[id] = r.Step
			}
		}
	}
	return bc, nil
}

// batchIDs names a batch: its number and its files' ids in batch order.
type batchIDs struct {
	seq int64
	ids []string
}

// before reports whether a step before step broke candidate id.
func (bc *brokenCopies) before(id string, step int) bool {
	k, ok := bc.at[id]
	return ok && k < step
}

// record keeps that step breaks the candidates ids (none: it breaks
// none), before the step's history commit.
func (p *Pipeline) recordBroken(ctx context.Context, bc *brokenCopies, step int, ids []string) error {
	for id, k := range bc.at {
		if k >= step { // an earlier attempt's record of this step or a later one
			delete(bc.at, id)
		}
	}
	name := brokenPath(bc.tableID, bc.seq, step)
	if len(ids) == 0 {
		if _, ok := bc.records[step]; !ok {
			return nil
		}
		if err := p.Lake.Delete(ctx, name); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return err
		}
		delete(bc.records, step)
		return nil
	}
	body, err := json.Marshal(brokenRecord{Seq: bc.seq, Step: step, Plan: bc.plan, Files: ids})
	if err != nil {
		return err
	}
	if _, err := p.Lake.Write(ctx, name, bytes.NewReader(body), objstore.WriteOptions{ContentType: "application/json"}); err != nil {
		return err
	}
	bc.records[step] = name
	for _, id := range ids {
		bc.at[id] = step
	}
	p.log().Info("history copies broken: a step found their events in the history", "event", "copies_broken", "table", bc.tableID, "batch", bc.seq, "step", step+1, "files", ids)
	return nil
}

// liveCandidates returns, of a step's candidates, those no earlier step
// broke: the CopyCandidate index (from 1) of each, and the candidates.
func liveCandidates(st batchStep, bc *brokenCopies, step int) (map[*batchFile]int32, []*batchFile) {
	if len(st.candidates) == 0 {
		return nil, nil
	}
	idx := map[*batchFile]int32{}
	var live []*batchFile
	for _, f := range st.candidates {
		if !bc.before(f.rec.ID, step) {
			live = append(live, f)
			idx[f] = int32(len(live))
		}
	}
	return idx, live
}

// copyCandidates are the step's live candidates as cdc takes them: every
// part of each, and the keys of the steps up to this one.
func (p *Pipeline) copyCandidates(st batchStep, live []*batchFile) []cdc.CopyCandidate {
	out := make([]cdc.CopyCandidate, len(live))
	for i, f := range live {
		c := cdc.CopyCandidate{ID: f.rec.ID, Through: st.through}
		for j := range f.m.Parts {
			c.Parts = append(c.Parts, p.historyFile(batchPart{file: f, part: j}))
		}
		out[i] = c
	}
	return out
}

// historyFile is a staged part as the history may take it as a file.
func (p *Pipeline) historyFile(bp batchPart) cdc.HistoryFile {
	part := bp.staged()
	return cdc.HistoryFile{Store: p.Lake, Add: part.Add, Schema: cdc.HistorySchema(bp.source()), Rows: part.Events}
}
