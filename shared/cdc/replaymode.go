package cdc

import (
	"bytes"
	"context"
	"encoding/binary"
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
// and rows come in, which is the rule of every mode (docs/table-modes.md
// "The three modes").

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
	case ModeSCD2:
		return scd2Rows(changes)
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
// pass and returns how many rows the pass's keys should have: an entry's
// sum becomes that of the key's rows (for several rows, as scd2 has, the
// sum of their sums, which does not depend on their order), and entDelete
// marks a key that should have none, which is what the comparison with
// the state rows reads.
func (rr *replayRun) settle(tab *keyTable) (int, error) {
	expected := 0
	for i := int32(0); i < int32(tab.len()); i++ {
		changes, err := rr.changesOf(tab, i)
		if err != nil {
			return expected, err
		}
		e := tab.entry(i)
		rows := modeRows(rr.mode, changes)
		if len(rows) == 0 {
			e.flags |= entDelete
			continue
		}
		e.flags &^= entDelete
		e.sum = [16]byte{}
		for _, row := range rows {
			sum, err := rr.sum(row, nil)
			if err != nil {
				return expected, err
			}
			e.sum = addSums(e.sum, sum)
		}
		expected += len(rows)
	}
	return expected, nil
}

// addSums adds two 128-bit row sums as two 64-bit halves: the sum of a
// key's row sums is the same in whatever order its rows come.
func addSums(a, b [16]byte) [16]byte {
	x0, x1 := binary.LittleEndian.Uint64(a[:8]), binary.LittleEndian.Uint64(a[8:])
	y0, y1 := binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])
	var out [16]byte
	binary.LittleEndian.PutUint64(out[:8], x0+y0)
	binary.LittleEndian.PutUint64(out[8:], x1+y1)
	return out
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

// compareVersions is compare for a mode with several rows per key (scd2):
// it sums the sums of each key's state rows and compares the total with
// the sum of the rows the history implies, listing a key that differs at
// its first row.
func (v *verifier) compareVersions(ctx context.Context, p *pass) (int, error) {
	type seen struct {
		sum        [16]byte
		fi         int
		row        []any
		rowNum     int64
		unexpected bool // already listed as unexpected
	}
	keys := map[int32]*seen{}
	var order []int32
	actual, err := v.stateRows(ctx, p, func(fi int, rowNum int64, row []any, i int32, e *keyEntry) error {
		s := keys[i]
		if s == nil {
			s = &seen{fi: fi, rowNum: rowNum, row: row}
			keys[i] = s
			order = append(order, i)
		}
		e.flags |= entSeen
		if e.flags&(entAbsent|entDelete) != 0 {
			if !s.unexpected {
				s.unexpected = true
				v.add(&found{file: fi, row: rowNum, Mismatch: Mismatch{Key: v.keyText(row), Reason: "unexpected: history says the key has no version"}})
			}
			return nil
		}
		sum, err := v.sum(row, nil)
		if err != nil {
			return err
		}
		s.sum = addSums(s.sum, sum)
		return nil
	})
	if err != nil {
		return actual, err
	}
	for _, i := range order {
		s := keys[i]
		if !s.unexpected && s.sum != p.tab.entry(i).sum {
			v.add(&found{file: s.fi, row: s.rowNum, Mismatch: Mismatch{Key: v.keyText(s.row), Reason: "versions differ from the replay of its history"}})
		}
	}
	return actual, nil
}
