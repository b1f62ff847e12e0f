package cdc

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// The former verify and rebuild, which replayed the whole history into
// maps: the oracle that the pass-by-pass Replay must equal, result for
// result and row for row.

// expected is the current state a history table implies.
type expected struct {
	source value.StructType
	key    []string
	rows   map[string][]any // key text → state row (StateSchema(source))
	tombs  map[string][]any // key text → tombstone row
	events int64
}

// inMemoryReplay replays a history table into the state it implies: per
// key, the event with the greatest order wins; a delete leaves a tombstone.
// It holds one entry per key in memory.
func inMemoryReplay(ctx context.Context, t TableSet, key []string, now time.Time) (*expected, error) {
	snap, err := delta.Open(t.History).Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	hs := snap.Schema()
	source := SourceSchema(hs)
	keyIdx, err := KeyIndexes(source, key)
	if err != nil {
		return nil, err
	}
	conform := HistorySchema(source)
	latest := map[string]Change{}
	var events int64
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, t.History, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			events++
			h, err := Conform(row, hs, conform)
			if err != nil {
				return err
			}
			c, err := ChangeFromHistory(h, source, keyIdx)
			if err != nil {
				return err
			}
			if cur, ok := latest[c.KeyText]; !ok || bytes.Compare(c.Order, cur.Order) > 0 {
				latest[c.KeyText] = c
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", t.ID, err)
		}
	}
	ex := &expected{source: source, key: key, rows: map[string][]any{}, tombs: map[string][]any{}, events: events}
	for k, c := range latest {
		if c.Delete {
			row := append(append([]any(nil), c.Key...), c.Order, c.Position, c.SourceTS, value.MicrosOf(now))
			ex.tombs[k] = row
			continue
		}
		row := append(append([]any(nil), c.Row...), c.SourceTS, nullIfEmpty(c.ChangeType), c.Position, c.Order)
		ex.rows[k] = row
	}
	return ex, nil
}

// inMemoryVerify rebuilds the expected current state from the history
// table and compares it with the current-state table row for row.
func inMemoryVerify(ctx context.Context, t TableSet) (VerifyResult, error) {
	var res VerifyResult
	snap, err := delta.Open(t.State).Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("state of %s: %w", t.ID, err)
	}
	key, err := stateKey(snap)
	if err != nil {
		return res, err
	}
	ex, err := inMemoryReplay(ctx, t, key, time.Now())
	if err != nil {
		return res, err
	}
	res.HistoryEvents, res.ExpectedRows = ex.events, len(ex.rows)
	ss := snap.Schema()
	want := StateSchema(ex.source)
	keyIdx, err := KeyIndexes(want, key)
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	add := func(m Mismatch) {
		res.Total++
		if len(res.Mismatches) < 100 {
			res.Mismatches = append(res.Mismatches, m)
		}
	}
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, t.State, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			res.ActualRows++
			row, err = Conform(row, ss, want)
			if err != nil {
				return err
			}
			k := make([]any, len(keyIdx))
			for i, p := range keyIdx {
				k[i] = row[p]
			}
			kt := KeyText(k)
			if seen[kt] {
				add(Mismatch{Key: kt, Reason: "key appears more than once"})
				return nil
			}
			seen[kt] = true
			exp, ok := ex.rows[kt]
			if !ok {
				add(Mismatch{Key: kt, Reason: "unexpected: history says the key is deleted or never existed"})
				return nil
			}
			for i := range want.Fields {
				if !value.EqualValues(row[i], exp[i]) {
					add(Mismatch{Key: kt, Reason: "column " + want.Fields[i].Name + " differs from the latest event in history"})
					break
				}
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("state of %s: %w", t.ID, err)
		}
	}
	var missing []string
	for k := range ex.rows {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		add(Mismatch{Key: k, Reason: "missing: history's latest event for the key is an upsert"})
	}
	return res, nil
}

// inMemoryRebuild recreates the current-state and tombstone tables from history
// in one commit each (removing every file, adding the replayed rows), and
// carries the batch txn versions over so exactly-once bookkeeping survives.
func inMemoryRebuild(ctx context.Context, t TableSet, targetFileBytes int64) (VerifyResult, error) {
	var res VerifyResult
	if targetFileBytes <= 0 {
		targetFileBytes = 128 << 20
	}
	hsnap, err := delta.Open(t.History).Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	snap, err := delta.Open(t.State).Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("state of %s: %w", t.ID, err)
	}
	key, err := stateKey(snap)
	if err != nil {
		return res, err
	}
	now := time.Now()
	ex, err := inMemoryReplay(ctx, t, key, now)
	if err != nil {
		return res, err
	}
	res.HistoryEvents, res.ExpectedRows = ex.events, len(ex.rows)
	seq, _ := hsnap.TxnVersion(AppID(t.ID))
	write := func(snap *delta.Snapshot, schema value.StructType, rows map[string][]any, keyLen int, what string) error {
		list := make([][]any, 0, len(rows))
		for _, r := range rows {
			list = append(list, r)
		}
		var kidx []int
		if what == "state" {
			kidx, _ = KeyIndexes(schema, key)
		} else {
			for i := 0; i < keyLen; i++ {
				kidx = append(kidx, i)
			}
		}
		keyOf := func(r []any) []any {
			k := make([]any, len(kidx))
			for i, p := range kidx {
				k[i] = r[p]
			}
			return k
		}
		sort.Slice(list, func(i, j int) bool { return value.CompareKeys(keyOf(list[i]), keyOf(list[j])) < 0 })
		adds, err := writeRows(ctx, snap.Store(), delta.WriteOptions{Schema: schema, PartitionColumns: snap.PartitionColumns()}, list, targetFileBytes)
		if err != nil {
			return err
		}
		md := snap.Metadata()
		if o, ok := hsnap.Configuration()[PropSchemaOrder]; ok && what == "state" {
			// The state takes the history's schema, so the order of the
			// change that set it too (schema mode "overwrite").
			md.Configuration = maps.Clone(md.Configuration)
			md.Configuration[PropSchemaOrder] = o
		}
		// The commit is Rebuild's: what this oracle checks is the rows.
		return replaceFiles(ctx, snap, md, schema, adds, len(list), AppID(t.ID), seq, now)
	}
	if err := write(snap, StateSchema(ex.source), ex.rows, len(key), "state"); err != nil {
		return res, fmt.Errorf("rebuild state of %s: %w", t.ID, err)
	}
	tombSchema, err := TombstoneSchema(ex.source, key)
	if err != nil {
		return res, err
	}
	tsnap, err := openTombstones(ctx, t, tombSchema, key)
	if err != nil {
		return res, err
	}
	if err := write(tsnap, tombSchema, ex.tombs, len(key), "tombstones"); err != nil {
		return res, fmt.Errorf("rebuild tombstones of %s: %w", t.ID, err)
	}
	return inMemoryVerify(ctx, t)
}
