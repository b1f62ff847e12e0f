package cdc

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Replaying a table mode other than current: a pass keeps every change of
// each key of its range (as value codes appended to the key's row, so that
// the pass's memory bound counts them), and applies the mode's rule to a
// key's changes once the pass has read the whole history. The rule sees
// the changes sorted by ordering key whatever order the history's files
// and rows come in, which is the rule DESIGN.md states for every mode.

// changeHead is how many values precede a collected change's row.
const changeHead = 5

// collect appends change c to entry i's changes.
func (rr *replayRun) collect(tab *keyTable, i int32, c Change) error {
	buf, err := appendCodes(rr.buf[:0], []any{c.Order, c.Delete, c.SourceTS, nullIfEmpty(c.ChangeType), c.Position}, codeExact)
	if err == nil {
		buf, err = appendCodes(buf, c.Row, codeExact)
	}
	rr.buf = buf
	if err != nil {
		return err
	}
	tab.appendRow(i, buf)
	return nil
}

// changesOf decodes the changes collected for entry i, sorted by ordering
// key, each order once (the history keeps a re-delivered event once, but a
// replay does not rely on it).
func (rr *replayRun) changesOf(tab *keyTable, i int32) ([]Change, error) {
	key, _, err := readCodes(nil, tab.keyOf(i), len(rr.key))
	if err != nil {
		return nil, err
	}
	kt := KeyText(key)
	var out []Change
	n := changeHead + len(rr.source.Fields)
	for b := tab.rows[i]; len(b) > 0; {
		var v []any
		if v, b, err = readCodes(make([]any, 0, n), b, n); err != nil {
			return nil, err
		}
		c := Change{Key: key, KeyText: kt, Row: v[changeHead:]}
		c.Order, _ = v[0].([]byte)
		c.Delete, _ = v[1].(bool)
		c.SourceTS, _ = v[2].(value.Micros)
		c.ChangeType, _ = v[3].(string)
		c.Position, _ = v[4].(string)
		out = append(out, c)
	}
	return inOrder(out), nil
}

// inOrder sorts a key's changes by ordering key, each order once.
func inOrder(cs []Change) []Change {
	slices.SortStableFunc(cs, func(a, b Change) int { return bytes.Compare(a.Order, b.Order) })
	return slices.CompactFunc(cs, func(a, b Change) bool { return bytes.Equal(a.Order, b.Order) })
}

// modeRows are the state rows the changes of one key imply in mode m
// (changes sorted by ordering key, each order once), in the mode's state
// schema.
func modeRows(m Mode, changes []Change) [][]any {
	if len(changes) == 0 {
		return nil
	}
	switch m {
	case ModeSoftDelete:
		if row := softDeleteRule(changes); row != nil {
			return [][]any{row}
		}
		return nil
	}
	last := changes[len(changes)-1]
	if last.Delete {
		return nil
	}
	tail := stateTail(last)
	return [][]any{append(slices.Clone(last.Row), tail[:]...)}
}

// settle applies the mode's rule to the changes of every key of a verify
// pass: an entry's sum becomes that of the row the key should have, and
// entDelete marks a key that should have none, which is what the
// comparison of current-mode rows reads.
func (rr *replayRun) settle(tab *keyTable) error {
	for i := int32(0); i < int32(tab.len()); i++ {
		changes, err := rr.changesOf(tab, i)
		if err != nil {
			return err
		}
		e := tab.entry(i)
		rows := modeRows(rr.mode, changes)
		if len(rows) == 0 {
			e.flags |= entDelete
			continue
		}
		if len(rows) > 1 {
			return fmt.Errorf("mode %s: %d rows for one key", rr.mode, len(rows))
		}
		e.flags &^= entDelete
		if e.sum, err = rr.sum(rows[0], nil); err != nil {
			return err
		}
	}
	return nil
}

// tombstoneOf is the tombstone row a key's changes imply (sorted by
// ordering key), nil unless its last change is a delete.
func tombstoneOf(changes []Change, deletedAt value.Micros) []any {
	if len(changes) == 0 || !changes[len(changes)-1].Delete {
		return nil
	}
	c := changes[len(changes)-1]
	return append(slices.Clone(c.Key), c.Order, c.Position, c.SourceTS, deletedAt)
}

// writeModeRows writes the state rows and the tombstone that entry i's
// changes imply, and returns how many of each.
func (rr *replayRun) writeModeRows(tab *keyTable, i int32, stateW, tombW *delta.RollingWriter, deletedAt value.Micros) (rows, tombs int, err error) {
	changes, err := rr.changesOf(tab, i)
	if err != nil {
		return 0, 0, err
	}
	for _, row := range modeRows(rr.mode, changes) {
		if err := stateW.Write(row); err != nil {
			return rows, tombs, fmt.Errorf("state: %w", err)
		}
		rows++
	}
	if tomb := tombstoneOf(changes, deletedAt); tomb != nil {
		if err := tombW.Write(tomb); err != nil {
			return rows, tombs, fmt.Errorf("tombstones: %w", err)
		}
		tombs++
	}
	return rows, tombs, nil
}
