package parquetfile

import (
	"fmt"
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// Column is a block of one column's values that a ColumnFill sets: value
// j is that of the block's row j. Its setters take the Go value of the
// column's Parquet physical type, never an interface, so a caller that
// holds a column's values typed writes them without boxing any; Set takes
// package value's Go value, as Write does, for the columns a caller holds
// that way. A value not set is null.
type Column struct {
	vals []parquet.Value
	node *Node
}

// Len is the number of rows in the block.
func (c Column) Len() int { return len(c.vals) }

// Kind is the Parquet physical type the typed setters must match: Int32
// for a date, byte, short, integer or decimal of up to 9 digits, Int64 for
// a long, timestamp or decimal of up to 18, ByteArray for a string or
// binary, Boolean for a boolean.
func (c Column) Kind() parquet.Kind { return c.node.parquetKind }

// SetNull makes value j null.
func (c Column) SetNull(j int) { c.vals[j] = parquet.Value{} }

// SetBool sets value j of a Boolean column.
func (c Column) SetBool(j int, v bool) { c.vals[j] = parquet.BooleanValue(v) }

// SetInt32 sets value j of an Int32 column.
func (c Column) SetInt32(j int, v int32) { c.vals[j] = parquet.Int32Value(v) }

// SetInt64 sets value j of an Int64 column.
func (c Column) SetInt64(j int, v int64) { c.vals[j] = parquet.Int64Value(v) }

// SetBytes sets value j of a ByteArray column to b, which the writer reads
// until the file is finished, and never writes through.
func (c Column) SetBytes(j int, b []byte) { c.vals[j] = parquet.ByteArrayValue(b) }

// SetString sets value j of a ByteArray column to s's bytes, lent as
// Convert lends a string's (parquet-go copies them into its buffers and
// never writes through them).
func (c Column) SetString(j int, s string) {
	c.vals[j] = parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// Set sets value j to v, a value of package value of the column's type or
// nil, as Write converts it.
func (c Column) Set(j int, v any) error {
	if v == nil {
		c.vals[j] = parquet.Value{}
		return nil
	}
	pv, err := c.node.Convert(v)
	if err != nil {
		return err
	}
	c.vals[j] = pv
	return nil
}

// ColumnFill sets the values of rows i0, i0+1, ..., i0+c.Len()-1 of the
// k-th column of a file (the field Fields[Columns[k]]) for WriteColumns.
// Its error, naming the row, fails the write.
type ColumnFill func(k, i0 int, c Column) error

// WriteColumns writes n rows as WriteInOrder does, row(order[0]) first,
// with the same bytes, but takes their values column by column from
// fill, a block of inOrderBlock rows of each column after another in
// index order, never as rows: neither Check nor Seen sees them. Only when
// CanWriteColumns(n) holds. Of several values that fail (a null in a
// column that is not nullable, or fill's error), the error is that of the
// first in row order, as Write reports it. After an error the file can
// only be aborted.
func (w *RowWriter) WriteColumns(n int, order []int32, fill ColumnFill) error {
	if !w.CanWriteColumns(n) {
		err := fmt.Errorf("write %s: %d rows of %d columns do not fit WriteColumns' arrays, or the schema is nested", w.name, n, len(w.colBatch))
		w.err = err
		return err
	}
	return w.writeArrays(n, order, func(cols [][]parquet.Value) error {
		for i0 := 0; i0 < n; i0 += inOrderBlock {
			m := min(inOrderBlock, n-i0)
			for k, nd := range w.root {
				col := cols[nd.Leaf][i0 : i0+m]
				err := fill(k, i0, Column{vals: col, node: nd})
				if err == nil {
					err = w.setLevels(col, k, nd, i0)
				}
				if err != nil {
					return w.firstColumnError(fill, i0, m, err)
				}
			}
		}
		return nil
	})
}

// setLevels sets the definition level and column index of the values col
// holds of rows i0, ... of the k-th column, as flatValue sets them, and
// checks that each is of the column's kind, or null where it may be.
func (w *RowWriter) setLevels(col []parquet.Value, k int, nd *Node, i0 int) error {
	for j := range col {
		if col[j].IsNull() {
			if !nd.Optional {
				return fmt.Errorf("write %s row %d: column %q: %w: null in non-nullable %v", w.name, i0+j, w.opts.Fields[w.opts.Columns[k]].Name, ErrValueType, nd.Type)
			}
			col[j].SetColumnIndex(nd.Leaf)
			continue
		}
		if col[j].Kind() != nd.parquetKind {
			// A typed setter's mistake would otherwise be written as
			// the column's kind reads its bits.
			return fmt.Errorf("write %s row %d: column %q: %w: a %v value in a %v column", w.name, i0+j, w.opts.Fields[w.opts.Columns[k]].Name, ErrValueType, col[j].Kind(), nd.parquetKind)
		}
		col[j].SetDefinitionLevel(nd.DefLevel)
		col[j].SetColumnIndex(nd.Leaf)
	}
	return nil
}

// firstColumnError is the error of the block of m rows from i0 that comes
// first in row order, err's when no other does: the block is filled again
// a row at a time, each row's columns in turn.
func (w *RowWriter) firstColumnError(fill ColumnFill, i0, m int, err error) error {
	var one [1]parquet.Value
	for j := range m {
		for k, nd := range w.root {
			rerr := fill(k, i0+j, Column{vals: one[:], node: nd})
			if rerr == nil {
				rerr = w.setLevels(one[:], k, nd, i0+j)
			}
			if rerr != nil {
				return rerr
			}
		}
	}
	return err
}
