package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// scd2MaxRatio is issue 16's target: an scd2 merge costs at most twice the
// current-mode merge of the same batch.
const scd2MaxRatio = 2.0

// scd2Scenario merges the clustered batch into an scd2 table of two
// versions per key and into a current-state table of the same keys, in a
// child process, the two in turn for verdictRuns runs each, and reports
// the ratio of their medians.
func scd2Scenario(ctx context.Context, rep *report, tmp string, quick bool) error {
	keys := int64(500_000) // 1M versions
	if quick {
		keys = 50_000
	}
	type table struct {
		mode     cdc.Mode
		d        mergebench.TableDirs
		build    func(context.Context, mergebench.TableDirs, int64) (int, int64, error)
		base     map[string]bool
		runs     []mergebench.ChildResult
		rows     int64 // after the merge
		files    int
		wantRows int64
	}
	tables := []*table{
		// Each update opens a version (its values differ from the current
		// one), each insert one; deletes close versions.
		{mode: cdc.ModeCurrent, build: mergebench.BuildStateTable, wantRows: keys + mergebench.BatchInserts - mergebench.BatchDeletes},
		{mode: cdc.ModeSCD2, build: mergebench.BuildSCD2Table, wantRows: 2*keys + mergebench.BatchUpdates + mergebench.BatchInserts},
	}
	var sides []func(int) error
	for _, t := range tables {
		t.d = mergebench.TableDirs{Root: filepath.Join(tmp, fmt.Sprintf("scd2-%s-%d", t.mode, keys))}
		logf("scd2: building a %s table of %d keys", t.mode, keys)
		files, _, err := t.build(ctx, t.d, keys)
		if err != nil {
			return err
		}
		t.files = files
		syscall.Sync()
		if t.base, err = mergebench.ListFiles(t.d.State()); err != nil {
			return err
		}
		sides = append(sides, func(int) error {
			r, err := mergeModeInChild(ctx, rep.child, t.d.Root, keys, "clustered", string(t.mode), "", "")
			if err != nil {
				return err
			}
			t.runs = append(t.runs, r)
			if t.rows, err = stateRows(ctx, t.d); err != nil {
				return err
			}
			if t.rows != t.wantRows {
				return fmt.Errorf("%s merge: table holds %d rows after, want %d", t.mode, t.rows, t.wantRows)
			}
			logf("scd2: %s: %.0f ms, %d rows after", t.mode, r.Millis, t.rows)
			return mergebench.ResetTable(t.d, t.base)
		})
	}
	if err := interleave(verdictRuns, sides...); err != nil {
		return err
	}
	cur, scd2 := tables[0], tables[1]
	curMs, scd2Ms := each(cur.runs, childMillis), each(scd2.runs, childMillis)
	rep.scd2Ratio = medianRatio(scd2Ms, curMs)
	rep.add("## SCD2 merge\n")
	rep.add("The clustered %d-change batch merged into an scd2 table (`mode: scd2`) of %s versions (%s keys, two versions each, compacted by the product's compaction: the closed versions in one file, the open ones in another, each sorted by key and valid-from) and into a current-state table of the same %s keys; `cdc.Apply` in a child process, %d runs of each, the two in turn: min – median – max, the ratio divides the medians. Every change of the batch is newer than the keys' last change, as when CDC moves on, so the scd2 merge extends the stored versions without reading the keys' history, and without reading or rewriting the file of closed versions: it looks up and closes the keys' open versions, and writes the closed versions with the new ones.\n",
		mergebench.BatchSize, humanRows(2*keys), humanRows(keys), humanRows(keys), verdictRuns)
	rep.add("| table | files | files rewritten | rows after | merge | ratio | target |")
	rep.add("|---|---|---|---|---|---|---|")
	rep.add("| current, %s rows | %d | %d | %s | %s ms | 1.00× | |", humanRows(keys), cur.files, cur.runs[0].Rewritten, humanRows(cur.rows), spread("%.0f", curMs))
	rep.add("| scd2, %s versions | %d | %d | %s | %s ms | %s | ≤ %.0f× %s |\n", humanRows(2*keys), scd2.files, scd2.runs[0].Rewritten, humanRows(scd2.rows), spread("%.0f", scd2Ms), ratioCell(scd2Ms, curMs), scd2MaxRatio, met(rep.scd2Ratio <= scd2MaxRatio))
	return nil
}

// childMillis is a child merge's time.
func childMillis(r mergebench.ChildResult) float64 { return r.Millis }

// stateRows is the row count of the state table in d.
func stateRows(ctx context.Context, d mergebench.TableDirs) (int64, error) {
	store, err := objstore.NewLocal(d.State())
	if err != nil {
		return 0, err
	}
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("read merged state table: %w", err)
	}
	n, _ := snap.NumRecords()
	return n, nil
}
