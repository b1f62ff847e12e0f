package cdc

// Mode soft_delete (issue 16). A key that ever had an upsert keeps one row:
//
//   - the values of its last upsert in ordering-key order (U), with U's
//     metadata columns (StateSchema's);
//   - ColIsDeleted, true when the key's last change is a delete (D, the
//     last delete: D.order > U.order), ColDeletedAt D's source timestamp
//     and ColDeleteOrder D's order; both null for a live key.
//
// So the row is a function of two maxima per key, U and D, and a batch is
// merged by taking the maxima of what the tables hold and what the batch
// brings: U* = max(U, U'), D* = max(D_row, D_tombstone, D'). Maxima make
// the merge independent of arrival order (a late upsert older than the
// delete still updates the values when it is newer than U, and the row
// stays deleted) and of re-delivery and crashes (taking a maximum again
// changes nothing): a re-run after a crash between the tombstone and the
// state commits finds the batch's deletes in the tombstone table and
// reaches the same row.
//
// A delete of a key without a row is only recorded in the tombstone table,
// as in mode current: "a key that was deleted but never upserted has no
// row", until an older upsert arrives, which makes a deleted row.

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// softKey is what one step brings of a key: its last upsert and its last
// delete, in ordering-key order.
type softKey struct {
	key     []any
	keyText string
	up, del *Change
}

// softKeys groups changes by key, sorted by key.
func softKeys(changes []Change) []softKey {
	idx := map[string]int{}
	var out []softKey
	for i := range changes {
		c := &changes[i]
		text := c.Text()
		j, ok := idx[text]
		if !ok {
			j = len(out)
			idx[text] = j
			out = append(out, softKey{key: c.Key, keyText: text})
		}
		k := &out[j]
		last := &k.up
		if c.Delete {
			last = &k.del
		}
		if *last == nil || bytes.Compare(c.Order, (*last).Order) > 0 {
			*last = c
		}
	}
	slices.SortFunc(out, func(a, b softKey) int { return value.CompareKeys(a.key, b.key) })
	return out
}

// softStored is what the state and tombstone tables hold of a key.
type softStored struct {
	row       []any   // the stored row in the step's state schema; nil: none
	rows      []rowAt // where the key's rows lie
	tombOrder []byte  // the key's last recorded delete, nil: none
	tombTS    value.Micros
}

// deleteMark is a key's last delete.
type deleteMark struct {
	order []byte
	ts    value.Micros
}

// softRow is the layout of a soft_delete row: base columns (StateSchema's)
// then softDeleteMeta.
type softRow struct{ base int }

func (l softRow) upOrder(row []any) []byte { b, _ := row[l.base-1].([]byte); return b }
func (l softRow) deleted(row []any) bool   { d, _ := row[l.base].(bool); return d }

// deleteOf is the delete a stored row is marked with (nil: live).
func (l softRow) deleteOf(row []any) *deleteMark {
	o, _ := row[l.base+2].([]byte)
	if o == nil {
		return nil
	}
	ts, _ := row[l.base+1].(value.Micros)
	return &deleteMark{o, ts}
}

// finish appends the soft-delete columns to base: the key is deleted when
// its last delete d is newer than its last upsert.
func (l softRow) finish(base []any, d *deleteMark) []any {
	row := append(make([]any, 0, l.base+len(softDeleteMeta)), base[:l.base]...)
	if d != nil && bytes.Compare(d.order, l.upOrder(base)) > 0 {
		return append(row, true, d.ts, d.order)
	}
	return append(row, false, nil, nil)
}

// planSoftDelete decides each key of a step in mode soft_delete from what
// the tables hold: the new rows (whole, in the state's schema), the rows
// they replace, and the deletes the tombstone table records. newBase
// renders a batch upsert as the base columns of a state row. It does no
// I/O.
func planSoftDelete(keys []softKey, found map[string]*softStored, lay softRow, newBase func(Change) ([]any, error)) (statePlan, error) {
	p := statePlan{touched: map[string]*roaring64.Bitmap{}, dropKeys: map[string]bool{}, rows: [][]any{}}
	for _, k := range keys {
		s := found[k.keyText]
		if s == nil {
			s = &softStored{}
		}
		base := s.row
		fromBatch := false
		if k.up != nil && (base == nil || bytes.Compare(k.up.Order, lay.upOrder(base)) > 0) {
			b, err := newBase(*k.up)
			if err != nil {
				return p, fmt.Errorf("key %s: %w", k.keyText, err)
			}
			base, fromBatch = b, true
		}
		var known *deleteMark
		if s.row != nil {
			known = lay.deleteOf(s.row)
		}
		if s.tombOrder != nil && (known == nil || bytes.Compare(s.tombOrder, known.order) > 0) {
			known = &deleteMark{s.tombOrder, s.tombTS}
		}
		last, buried := known, false
		if k.del != nil && (known == nil || bytes.Compare(k.del.Order, known.order) > 0) {
			last = &deleteMark{k.del.Order, k.del.SourceTS}
			if base == nil || bytes.Compare(k.del.Order, lay.upOrder(base)) > 0 {
				// The batch's delete is the key's last change: the
				// tombstone table records it, as in mode current.
				p.keys = append(p.keys, *k.del)
				p.verdicts = append(p.verdicts, Bury)
				buried = true
			}
		}
		if base == nil { // never upserted: no row
			if buried {
				p.buried++
			} else {
				p.stale++
			}
			continue
		}
		row := lay.finish(base, last)
		if s.row != nil && !fromBatch && lay.deleted(s.row) == lay.deleted(row) && bytes.Equal(markOrder(lay.deleteOf(s.row)), markOrder(lay.deleteOf(row))) {
			p.stale++ // nothing the row shows changes
			continue
		}
		switch {
		case s.row == nil:
			p.inserted++
		case lay.deleted(row) && !lay.deleted(s.row):
			p.deleted++
		default:
			p.updated++
		}
		if s.row != nil {
			p.dropKeys[k.keyText] = true
			p.dropFirsts = append(p.dropFirsts, k.key[0])
			p.touch(s.rows)
		}
		p.rows = append(p.rows, row)
	}
	return p, nil
}

func markOrder(d *deleteMark) []byte {
	if d == nil {
		return nil
	}
	return d.order
}

// applySoftDelete is applyState in mode soft_delete: lookup (whole rows of
// the state, the tombstones' orders), plan (planSoftDelete), execute (the
// tombstone then the state commit, as in mode current).
func (st *stateStep) applySoftDelete(ctx context.Context, res *Result, historyCommitted <-chan struct{}) error {
	keys := softKeys(st.b.Changes)
	res.Keys = int64(len(keys))
	res.Collapsed = res.Events - res.Keys
	found, err := st.softLookup(ctx, keys)
	if err != nil {
		return err
	}
	schema := st.schema(st.stateSource)
	st.known.publish(softKnown(st.tombSnap, found, softRow{base: len(schema.Fields) - len(softDeleteMeta)}))
	res.FilesRead = len(st.candidates)
	lay := softRow{base: len(schema.Fields) - len(softDeleteMeta)}
	plan, err := planSoftDelete(keys, found, lay, func(c Change) ([]any, error) {
		src, err := conformFor(st.opts.Overwrite, c.Row, st.b.Source, st.stateSource)
		if err != nil {
			return nil, err
		}
		tail := stateTail(c)
		return append(append(make([]any, 0, lay.base), src...), tail[:]...), nil
	})
	if err != nil {
		return err
	}
	return st.commitPlan(ctx, plan, res, historyCommitted)
}

// softKnown is what a soft_delete lookup tells the history's duplicate
// check: a key's row records its last upsert's order and its last
// delete's, which outlives the tombstone.
func softKnown(tomb *delta.Snapshot, found map[string]*softStored, lay softRow) knownOrders {
	k := newKnownOrders(tomb, len(found))
	for text, s := range found {
		k.note(text, s.tombOrder)
		if s.row == nil {
			continue
		}
		up := lay.upOrder(s.row)
		if up == nil {
			k.unknowable[text] = true
		}
		k.note(text, up)
		if d := lay.deleteOf(s.row); d != nil {
			k.note(text, d.order)
		}
	}
	return k
}

// softLookup reads the whole state rows of the step's keys (a row that
// only changes its deleted mark is written again from them) and the
// tombstones' orders, from the files and row groups whose key bounds can
// hold a key.
func (st *stateStep) softLookup(ctx context.Context, keys []softKey) (map[string]*softStored, error) {
	found := make(map[string]*softStored, len(keys))
	probe := make([]Change, len(keys)) // the keys as prune and firstKeyFilter take them
	for i, k := range keys {
		found[k.keyText] = &softStored{}
		probe[i] = Change{Key: k.key, KeyText: k.keyText}
	}
	schema := st.schema(st.stateSource)
	stored := st.stateSnap.Schema()
	keyIdx, err := KeyIndexes(stored, st.keyNames)
	if err != nil {
		return nil, err
	}
	st.candidates = prune(st.stateSnap.Files(), st.keyNames[0], st.keyTypes[0], probe)
	conform := rowConform(st.opts.Overwrite, stored, schema)
	err = readKeyed(ctx, st.stateSnap, st.candidates, nil, keyIdx, st.keyNames[0], probe, found, func(s *softStored, row []any, path string, pos int64) error {
		r, err := conform(row)
		if err != nil {
			return err
		}
		lay := softRow{base: len(schema.Fields) - len(softDeleteMeta)}
		if s.row == nil || bytes.Compare(lay.upOrder(r), lay.upOrder(s.row)) > 0 {
			s.row = r
		}
		s.rows = append(s.rows, rowAt{path: path, pos: pos})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state lookup: %w", err)
	}
	n := len(st.keyNames)
	cols := append(slices.Clone(st.keyNames), ColOrder, ColSourceTimestamp)
	tombKeys := make([]int, n)
	for i := range tombKeys {
		tombKeys[i] = i // the key columns come first in cols
	}
	tombFiles := prune(st.tombSnap.Files(), st.keyNames[0], st.keyTypes[0], probe)
	err = readKeyed(ctx, st.tombSnap, tombFiles, cols, tombKeys, st.keyNames[0], probe, found, func(s *softStored, row []any, _ string, _ int64) error {
		order, _ := row[n].([]byte)
		if s.tombOrder == nil || bytes.Compare(order, s.tombOrder) > 0 {
			s.tombOrder = order
			s.tombTS, _ = row[n+1].(value.Micros)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tombstone lookup: %w", err)
	}
	return found, nil
}

// softDeleteRule is the row of a key in mode soft_delete given all its
// changes, nil when it never had an upsert: the plain statement of the
// rule that verify and rebuild replay (the merge reaches it by maxima).
func softDeleteRule(changes []Change) []any {
	if len(changes) == 0 {
		return nil
	}
	k := softKeys(changes)[0] // the changes of one key
	up, del := k.up, k.del
	if up == nil {
		return nil
	}
	tail := stateTail(*up)
	base := append(slices.Clone(up.Row), tail[:]...)
	var d *deleteMark
	if del != nil {
		d = &deleteMark{del.Order, del.SourceTS}
	}
	return softRow{base: len(base)}.finish(base, d)
}
