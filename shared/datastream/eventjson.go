package datastream

import (
	"fmt"

	"github.com/dsdelta/dsdelta/shared/value"
)

// AppendJSON appends the event as the one-line JSON object `dsdelta decode`
// prints: table, op, key (an object of key column → value, null for a
// history-only table), order (the readable position), source_timestamp,
// read_method, change_type and row, values in the canonical encoding of
// value.AppendJSON.
func (ev Event) AppendJSON(dst []byte) ([]byte, error) {
	var err error
	dst = append(dst, `{"table":`...)
	dst, _ = value.AppendJSON(dst, value.String, ev.Table.String())
	dst = append(dst, `,"op":`...)
	dst, _ = value.AppendJSON(dst, value.String, ev.Op.String())
	dst = append(dst, `,"key":`...)
	if ev.HistoryOnly {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '{')
		for i, name := range ev.KeyNames {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst, _ = value.AppendJSON(dst, value.String, name)
			dst = append(dst, ':')
			f, _ := ev.Schema.Field(name)
			if dst, err = value.AppendJSON(dst, f.Type, ev.KeyValues[i]); err != nil {
				return dst, fmt.Errorf("key %q: %w", name, err)
			}
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"order":`...)
	dst, _ = value.AppendJSON(dst, value.String, ev.Order.Text)
	dst = append(dst, `,"source_timestamp":`...)
	dst, _ = value.AppendJSON(dst, value.Timestamp, ev.SourceTimestamp)
	dst = append(dst, `,"read_method":`...)
	dst, _ = value.AppendJSON(dst, value.String, ev.ReadMethod.String())
	dst = append(dst, `,"change_type":`...)
	dst, _ = value.AppendJSON(dst, value.String, ev.ChangeType)
	dst = append(dst, `,"row":`...)
	if dst, err = value.AppendRowJSON(dst, ev.Schema, ev.Row); err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}
