package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Mode is what a current-state table keeps (docs/table-modes.md).
// The history and tombstone tables are the same in every mode.
type Mode string

// Modes.
const (
	// ModeCurrent keeps one row per live key: the change with the greatest
	// ordering key wins, a delete removes the row.
	ModeCurrent Mode = "current"
	// ModeSoftDelete keeps one row per key that ever had an upsert, with
	// the values of its last upsert in ordering-key order; a key whose
	// last change is a delete is marked (ColIsDeleted, ColDeletedAt), not
	// removed. See softdelete.go.
	ModeSoftDelete Mode = "soft_delete"
	// ModeSCD2 keeps one row per version of a key, with its validity
	// interval (ColValidFrom, ColValidTo) and ColIsCurrent. See scd2.go.
	ModeSCD2 Mode = "scd2"
)

// PropMode records a current-state table's mode in its properties. A table
// without it was created before modes existed: mode current.
const PropMode = "dsdelta.mode"

// ColDeleteOrder is, in a soft_delete table, the ordering key of the delete
// that marks the row deleted (null for a live row). The merge compares a
// late upsert with it: the tombstone table, which also records it, forgets
// deletes after its retention; the row must not.
const ColDeleteOrder = "_ds_delete_order"

// ErrModeMismatch: the configuration asks for another mode than the one
// the table was built in. Only a rebuild from history changes a table's
// mode.
var ErrModeMismatch = errors.New("table mode differs from the configured mode")

// ParseMode checks a mode name; "" is ModeCurrent.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeCurrent, nil
	case ModeCurrent, ModeSoftDelete, ModeSCD2:
		return m, nil
	}
	return "", fmt.Errorf("mode %q is not one of %s, %s, %s", s, ModeCurrent, ModeSoftDelete, ModeSCD2)
}

// TableMode is the mode a current-state table was built in.
func TableMode(snap *delta.Snapshot) Mode {
	if m := Mode(snap.Configuration()[PropMode]); m != "" {
		return m
	}
	return ModeCurrent
}

// CheckMode refuses a table built in another mode than want, naming the
// command that converts it.
func CheckMode(snap *delta.Snapshot, id string, want Mode) error {
	if want == "" {
		want = ModeCurrent
	}
	if got := TableMode(snap); got != want {
		return fmt.Errorf("%w: %s was built in mode %s and the configuration asks for mode %s; "+
			"'dsdelta rebuild --mode %s %s' recreates it from its history in mode %s (or set the mode back to %s)",
			ErrModeMismatch, id, got, want, want, snap.Store().URL(), want, got)
	}
	return nil
}

// softDeleteMeta follow stateMeta in a soft_delete table.
var softDeleteMeta = []value.Field{
	{Name: ColIsDeleted, Type: value.Boolean, Nullable: false},
	{Name: ColDeletedAt, Type: value.Timestamp, Nullable: true},
	{Name: ColDeleteOrder, Type: value.Binary, Nullable: true},
}

// SoftDeleteSchema is a soft_delete table's schema for a source schema:
// StateSchema's columns, then softDeleteMeta.
func SoftDeleteSchema(source value.StructType) value.StructType {
	return stateSchemaWith(source, softDeleteMeta)
}

// stateSchemaWith is StateSchema(source) followed by a mode's columns.
func stateSchemaWith(source value.StructType, meta []value.Field) value.StructType {
	st := StateSchema(source)
	st.Fields = append(st.Fields, meta...)
	return st
}

// stateSchemaOf is the current-state table's schema function in mode m.
func stateSchemaOf(m Mode) func(value.StructType) value.StructType {
	switch m {
	case ModeSoftDelete:
		return SoftDeleteSchema
	case ModeSCD2:
		return SCD2Schema
	}
	return StateSchema
}

// errStateFailed tells the history side of a batch that the state side
// could not open its tables (and returns why itself).
var errStateFailed = errors.New("state side failed")

// commitPlan executes a step's plan, whatever the mode planned it: the
// tombstone commit, then the state commit (the order exactly-once relies
// on), each skipped when its table already holds the step.
func (st *stateStep) commitPlan(ctx context.Context, plan statePlan, res *Result, historyCommitted <-chan struct{}) error {
	res.Stale, res.Inserted, res.Updated, res.Deleted, res.Buried = plan.stale, plan.inserted, plan.updated, plan.deleted, plan.buried
	// The history's commit, which the commits below wait for, waits for
	// the lookup's knownOrders: a mode that published none has them all
	// checked.
	st.known.publish(checkAll)
	if !st.tombDone {
		if err := st.commitTombstones(ctx, plan, res, historyCommitted); err != nil {
			return err
		}
	}
	if st.stateDone {
		return nil
	}
	return st.commitState(ctx, plan, res, historyCommitted)
}

// rowConform is conformFor from one schema to another, the schemas compared
// once: a lookup conforms every row it keeps, and most tables need nothing
// done.
func rowConform(overwrite bool, from, to value.StructType) func([]any) ([]any, error) {
	if value.Equal(from, to) {
		return func(row []any) ([]any, error) { return row, nil }
	}
	return func(row []any) ([]any, error) { return conformFor(overwrite, row, from, to) }
}
