package cdc

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// PropSchemaOrder is the table property that, in schema mode "overwrite",
// records the ordering key (hex) of the change whose source schema the
// table holds: the greatest order of the batch that last set the schema.
//
// Datastream files reach us in any order, so "the newest file" is not "the
// newest schema": a late file of the old schema would otherwise revert the
// table and drop the new columns' values. A batch replaces the schema only
// when its greatest order is greater than the recorded one; an older batch
// is conformed to the table's schema instead (columns it lacks are null,
// columns the table no longer has are dropped) and its rows still go
// through the per-key rule. The property is written in the very commit
// that changes the schema (or creates the table), with the batch's txn, so
// a crash leaves schema and order consistent; each of the state and
// history tables carries its own.
//
// History follows the same rule as the state in this mode: it holds the
// newest change's schema (a schema change rewrites its files, dropping
// the columns gone), and the rows of an older batch are appended conformed
// to it, so a column the source no longer has is not kept in history
// either. Tables from before the property record it at their next
// overwrite-mode batch.
const PropSchemaOrder = "dsdelta.schemaOrder"

// historyOrderIndex is the position of ColOrder in a history row.
func historyOrderIndex() int {
	for i, f := range historyMeta {
		if f.Name == ColOrder {
			return i
		}
	}
	return -1
}

// BatchOrder is the greatest ordering key of a batch's changes (nil for an
// empty batch): the position in the source as of which the batch's schema
// holds. Changes of history-only tables carry their order in History.
func BatchOrder(b Batch) []byte {
	var out []byte
	at := historyOrderIndex()
	for _, c := range b.Changes {
		o := c.Order
		if o == nil && at >= 0 && len(c.History) > at {
			o, _ = c.History[at].([]byte)
		}
		if out == nil || bytes.Compare(o, out) > 0 {
			out = o
		}
	}
	return out
}

// schemaOrder reads PropSchemaOrder of a table; ok is false when the table
// has none (created before the property existed, or in merge mode).
func schemaOrder(snap *delta.Snapshot) (order []byte, ok bool, err error) {
	s, ok := snap.Configuration()[PropSchemaOrder]
	if !ok || s == "" {
		return nil, false, nil
	}
	order, err = hex.DecodeString(s)
	if err != nil {
		return nil, false, fmt.Errorf("table property %s=%q: %w", PropSchemaOrder, s, err)
	}
	return order, true, nil
}

// withSchemaOrder returns a copy of conf recording order.
func withSchemaOrder(conf map[string]string, order []byte) map[string]string {
	out := maps.Clone(conf)
	if out == nil {
		out = map[string]string{}
	}
	out[PropSchemaOrder] = hex.EncodeToString(order)
	return out
}

// overwriteEvolve is schema mode "overwrite" for a table: incoming, the
// source schema as of order, replaces the table's schema unless the table
// already holds the schema of a change at least as new. It returns the new
// metadata (nil when nothing changes), the table's resulting source schema
// and the order of the change that set it, and whether existing rows must
// be rewritten.
func overwriteEvolve(snap *delta.Snapshot, incoming value.StructType, order []byte, full func(value.StructType) value.StructType, key []string) (md *delta.Metadata, next value.StructType, nextOrder []byte, rewrite bool, err error) {
	current := SourceSchema(snap.Schema())
	stored, known, err := schemaOrder(snap)
	if err != nil {
		return nil, current, nil, false, err
	}
	if known && bytes.Compare(order, stored) <= 0 {
		// The batch is older than the schema: its rows are conformed to
		// the table. Keys are compared by value, so they must still match.
		if err := checkKeyTypes(current, incoming, key); err != nil {
			return nil, current, stored, false, err
		}
		return nil, current, stored, false, nil
	}
	md, next, rewrite, err = replaceSchema(snap, current, incoming, full, key)
	if err != nil {
		return nil, current, stored, false, err
	}
	if md == nil {
		if known {
			// Same schema: the recorded order still marks where it began.
			return nil, current, stored, false, nil
		}
		// A table from before the property: record the order once, so a
		// later, older batch cannot revert the schema.
		m := snap.Metadata()
		md = &m
	}
	md.Configuration = withSchemaOrder(md.Configuration, order)
	return md, next, order, rewrite, nil
}

// checkKeyTypes refuses a batch whose key columns differ in type from the
// table's: tombstones and lookups compare keys by value.
func checkKeyTypes(current, incoming value.StructType, key []string) error {
	for _, k := range key {
		cur, ok1 := current.Field(k)
		in, ok2 := incoming.Field(k)
		if ok1 && ok2 && !value.Equal(cur.Type, in.Type) {
			return fmt.Errorf("%w: primary key %s", ErrSchemaConflict, Retype{Column: cur.Name, Old: cur.Type, New: in.Type})
		}
		if !ok2 {
			return fmt.Errorf("primary key column %q is not in the schema %s", k, incoming)
		}
	}
	return nil
}
