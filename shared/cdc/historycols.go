package cdc

import (
	"fmt"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// HistoryColumns writes the rows HistoryRows makes, column by column
// (delta.FileWriter.WriteColumns), with no value boxed: the metadata
// columns are set from each event's typed fields, the source columns from
// its row's values. Staging writes every event's history row once; boxing
// its dozen metadata values to have them converted back at once was a
// sixth of a backfill's staging. The events must be of one schema, whose
// HistorySchema is the file's (a part of several schemas is conformed row
// by row: HistoryRows and Conform).
type HistoryColumns struct {
	// At is the event of row i.
	At     func(i int) *datastream.Event
	orders value.Arena // copies of the ordering keys: the events' bytes are the decoder's
	file   *datastream.SourceFile
	name   string // file's source file column
	day    lastBox[value.Days]
	days   value.Boxes[value.Days]
	rows   HistoryRows // for Value's other metadata
}

// Value is ev's value of history schema field f, as HistoryRows renders
// it: what a file writer asks of its partition column (the source date)
// and of the columns whose statistics it takes row by row (source
// columns of floating-point and wide decimal types). Only another
// metadata column makes a row.
func (h *HistoryColumns) Value(f int, ev *datastream.Event) any {
	switch {
	case f >= len(historyMeta):
		return ev.Row[f-len(historyMeta)]
	case historyMeta[f].Name == ColSourceDate:
		return h.day.get(value.DaysOf(ev.SourceTimestamp.Time()), &h.days)
	}
	return h.rows.Row(ev)[f]
}

// Fill sets the values of rows i0, i0+1, ... of history schema field f.
func (h *HistoryColumns) Fill(f, i0 int, c delta.Column) error {
	if f >= len(historyMeta) {
		j := f - len(historyMeta)
		for r := range c.Len() {
			ev := h.At(i0 + r)
			if j >= len(ev.Row) {
				return fmt.Errorf("record %d: %d source values for column %d", ev.Meta.Record, len(ev.Row), j)
			}
			if err := c.Set(r, ev.Row[j]); err != nil {
				return fmt.Errorf("record %d: column %q: %w", ev.Meta.Record, ev.Schema.Fields[j].Name, err)
			}
		}
		return nil
	}
	h.fillMeta(historyMeta[f].Name, i0, c)
	return nil
}

// fillMeta sets the values of rows i0, ... of the metadata column name,
// as HistoryRows.RowInto renders them: null where it has nil.
func (h *HistoryColumns) fillMeta(name string, i0 int, c delta.Column) {
	n := c.Len()
	switch name {
	case ColSourceDate:
		for r := range n {
			c.SetInt32(r, int32(value.DaysOf(h.At(i0+r).SourceTimestamp.Time())))
		}
	case ColOp:
		for r := range n {
			c.SetString(r, h.At(i0+r).Op.String())
		}
	case ColChangeType:
		for r := range n {
			setString(c, r, h.At(i0+r).ChangeType)
		}
	case ColSourceTimestamp:
		for r := range n {
			c.SetInt64(r, int64(h.At(i0+r).SourceTimestamp))
		}
	case ColReadTimestamp:
		for r := range n {
			if ts := h.At(i0 + r).Meta.ReadTimestamp; ts != 0 {
				c.SetInt64(r, int64(ts))
			}
		}
	case ColReadMethod:
		for r := range n {
			setString(c, r, h.At(i0+r).Meta.ReadMethod)
		}
	case ColPosition:
		for r := range n {
			c.SetString(r, h.At(i0+r).Order.Text)
		}
	case ColOrder:
		for r := range n {
			c.SetBytes(r, h.order(h.At(i0+r).Order.Bytes))
		}
	case ColUUID:
		for r := range n {
			setString(c, r, h.At(i0+r).Meta.UUID)
		}
	case ColIsDeleted:
		for r := range n {
			c.SetBool(r, h.At(i0+r).Meta.IsDeleted)
		}
	case ColSourceFile:
		for r := range n {
			if f := h.At(i0 + r).Meta.File; f != nil && f.Name != "" {
				c.SetString(r, h.fileName(f))
			}
		}
	case ColSourceGeneration:
		for r := range n {
			var g int64
			if f := h.At(i0 + r).Meta.File; f != nil {
				g = f.Generation
			}
			c.SetInt64(r, g)
		}
	case ColRecord:
		for r := range n {
			c.SetInt64(r, h.At(i0+r).Meta.Record)
		}
	default:
		panic("cdc: HistoryColumns has no rule for metadata column " + name)
	}
}

// setString sets value r to s, or null when s is empty.
func setString(c delta.Column, r int, s string) {
	if s != "" {
		c.SetString(r, s)
	}
}

// order returns a copy of an ordering key, as HistoryRows.order does.
func (h *HistoryColumns) order(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return h.orders.Bytes(b)
}

// fileName is the source file column of f's events, bucket/name (name
// alone without a bucket), joined once per file.
func (h *HistoryColumns) fileName(f *datastream.SourceFile) string {
	if f != h.file {
		h.file, h.name = f, f.Bucket+"/"+f.Name
		if f.Bucket == "" {
			h.name = f.Name
		}
	}
	return h.name
}
