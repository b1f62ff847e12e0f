package parquetfile

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// ErrWriterClosed is returned when a finished or aborted RowWriter is used.
var ErrWriterClosed = errors.New("file writer is closed")

// RowWriterOptions configure a RowWriter.
type RowWriterOptions struct {
	WriterOptions
	// Fields are the fields of a row, which holds a value per field.
	Fields []value.Field
	// Columns are the row positions of the schema's columns: its Columns[k]
	// is the field Fields[Columns[k]]. Fields of no column (a table's
	// partition columns) are not stored.
	Columns []int
	// RowGroupBytes is the buffered (uncompressed) size at which a row
	// group is flushed, RowGroupRows the row count, whichever comes first.
	RowGroupBytes, RowGroupRows int64
	// ValueArrays, when set, lends WriteInOrder its arrays of values and
	// takes them back, for the next file written with it to reuse.
	ValueArrays *ValueArrays
	// Check, when set, checks row, number n of the file, before its values
	// are converted; its error fails the write.
	Check func(row []any, n int64) error
	// Seen, when set, sees every row written, once its values are
	// converted (by WriteInOrder: once it is checked).
	Seen func(row []any)
}

// RowWriter streams rows of package value's values into a Parquet file of
// an object (see Writer): it converts them to their leaf columns' values,
// batches them column by column, hands the batches to parquet-go and ends
// a row group where it is full. It also appends row groups of other files,
// whole or without some of their rows. Finish ends the file, Commit then
// completes the object; Abort discards it. A RowWriter is not safe for
// concurrent use.
type RowWriter struct {
	opts   RowWriterOptions
	name   string
	root   []*Node
	flat   bool // every column is a leaf (writeFlat applies)
	closed bool
	// leafVals are the values of the row being shredded, by leaf.
	leafVals [][]parquet.Value
	// colBatch holds the rows written since the last hand-over to
	// parquet-go (nbatch of them) column by column: whole rows of each
	// leaf column, as parquet-go's WriteRows would split them.
	colBatch [][]parquet.Value
	nbatch   int
	pw       *Writer
	rows     int64
	rgStart  int64 // pw.Size() when the current row group started
	rgRows   int64 // w.rows when the current row group started
	err      error
}

// writeBatchRows is how many rows are handed to parquet-go at once, and
// how often the row group's size is checked. A page ends only between two
// hand-overs; the batch is in memory anyway, so a page of wide rows does
// not hold more than the batch did.
const writeBatchRows = 128

// NewRowWriter starts the file name (object name in store) of schema.
func NewRowWriter(ctx context.Context, store objstore.Store, name string, schema *Schema, opts RowWriterOptions) *RowWriter {
	w := &RowWriter{opts: opts, name: name, root: schema.Columns, flat: true}
	for _, n := range w.root {
		w.flat = w.flat && n.Kind == LeafNode
	}
	w.leafVals = make([][]parquet.Value, schema.Leaves)
	w.colBatch = make([][]parquet.Value, schema.Leaves)
	for i := range w.colBatch {
		w.colBatch[i] = make([]parquet.Value, 0, writeBatchRows)
	}
	w.pw = NewWriter(ctx, store, name, schema.Parquet, opts.WriterOptions)
	return w
}

// Schema is the file's Parquet schema.
func (w *RowWriter) Schema() *parquet.Schema { return w.pw.Schema() }

// Rows returns the number of rows written so far.
func (w *RowWriter) Rows() int64 { return w.rows }

// Size is how many bytes the file holds so far, the row group being
// written included (its buffered, uncompressed size): the rows batched are
// handed to parquet-go first.
func (w *RowWriter) Size() int64 {
	w.flushBatch()
	return w.pw.Size()
}

// Closed reports whether the file is finished or aborted.
func (w *RowWriter) Closed() bool { return w.closed }

// Fail fails the file for err: it takes no more rows and can only be
// aborted. It returns err.
func (w *RowWriter) Fail(err error) error {
	w.err = err
	return err
}

// Write appends one row: one value per field of Fields, in the Go
// representation of package value. The row is not retained.
func (w *RowWriter) Write(row []any) error {
	if err := w.writable(); err != nil {
		return err
	}
	if w.opts.Check != nil {
		if err := w.opts.Check(row, w.rows); err != nil {
			return err
		}
	}
	if w.flat {
		if err := w.writeFlat(row); err != nil {
			return err
		}
	} else {
		for i := range w.leafVals {
			w.leafVals[i] = w.leafVals[i][:0]
		}
		for k, n := range w.root {
			if err := n.Shred(w.leafVals, row[w.opts.Columns[k]], 0, 0); err != nil {
				return fmt.Errorf("write %s row %d: column %q: %w", w.name, w.rows, w.opts.Fields[w.opts.Columns[k]].Name, err)
			}
		}
		for i, vals := range w.leafVals {
			w.colBatch[i] = append(w.colBatch[i], vals...)
		}
	}
	if w.opts.Seen != nil {
		w.opts.Seen(row)
	}
	return w.rowWritten()
}

// writable is why the file takes no more rows, if it does not: it is
// closed, or an earlier write failed.
func (w *RowWriter) writable() error {
	if w.closed {
		return ErrWriterClosed
	}
	return w.err
}

// rowWritten counts a row whose values are in the column batches, and
// hands a full batch to parquet-go, ending the row group where it is
// full.
func (w *RowWriter) rowWritten() error {
	w.nbatch++
	w.rows++
	if w.nbatch < writeBatchRows {
		return nil
	}
	if err := w.flushBatch(); err != nil {
		return err
	}
	return w.endFullRowGroup()
}

// endFullRowGroup ends the row group when it is full, by size or rows;
// the rows written are parquet-go's already.
func (w *RowWriter) endFullRowGroup() error {
	if w.pw.Size()-w.rgStart >= w.opts.RowGroupBytes || w.rows-w.rgRows >= w.opts.RowGroupRows {
		if err := w.pw.Flush(); err != nil {
			w.err = fmt.Errorf("write %s: flush row group: %w", w.name, err)
			return w.err
		}
		w.rgStart, w.rgRows = w.pw.Size(), w.rows
	}
	return nil
}

// writeFlat is Write's shredding for a schema of leaves only: each value
// goes straight to its column's batch, one value per row and column, so a
// row that fails part-way is taken back by cutting every column to the
// rows before it.
func (w *RowWriter) writeFlat(row []any) error {
	for k, n := range w.root {
		w.colBatch[n.Leaf] = append(w.colBatch[n.Leaf], parquet.Value{})
		batch := w.colBatch[n.Leaf]
		if err := w.flatValue(&batch[len(batch)-1], k, n, row[w.opts.Columns[k]], w.rows); err != nil {
			w.unwriteFlat()
			return err
		}
	}
	return nil
}

// flatValue converts v, the value of row r's k-th column (leaf n), to its
// Parquet value in dst. The levels are set in place: a Value is copied
// once, not through Level's returns.
func (w *RowWriter) flatValue(dst *parquet.Value, k int, n *Node, v any, r int64) error {
	if v == nil {
		if !n.Optional {
			return fmt.Errorf("write %s row %d: column %q: %w: null in non-nullable %v", w.name, r, w.opts.Fields[w.opts.Columns[k]].Name, ErrValueType, n.Type)
		}
		*dst = parquet.Value{}
		dst.SetColumnIndex(n.Leaf)
		return nil
	}
	pv, err := n.Convert(v)
	if err != nil {
		return fmt.Errorf("write %s row %d: column %q: %w", w.name, r, w.opts.Fields[w.opts.Columns[k]].Name, err)
	}
	*dst = pv
	dst.SetDefinitionLevel(n.DefLevel)
	dst.SetColumnIndex(n.Leaf)
	return nil
}

// unwriteFlat drops the values of a row writeFlat did not finish.
func (w *RowWriter) unwriteFlat() {
	for i := range w.colBatch {
		if len(w.colBatch[i]) > w.nbatch {
			clear(w.colBatch[i][w.nbatch:])
			w.colBatch[i] = w.colBatch[i][:w.nbatch]
		}
	}
}

func (w *RowWriter) flushBatch() error {
	if w.nbatch == 0 || w.err != nil {
		return w.err
	}
	// Each column writer takes the batch's values of its leaf, whole rows
	// at a time, which is what parquet-go's WriteRows does after taking
	// every row apart again: rows are never assembled.
	for i, cw := range w.pw.ColumnWriters() {
		if _, err := cw.WriteRowValues(w.colBatch[i]); err != nil {
			w.err = fmt.Errorf("write %s: %w", w.name, err)
			return w.err
		}
		clear(w.colBatch[i]) // let go of the values' bytes
		w.colBatch[i] = w.colBatch[i][:0]
	}
	w.nbatch = 0
	return nil
}

// Finish hands the rows batched to parquet-go and writes the rest of the
// file and its footer, which it returns; the file takes no more rows. The
// object is not complete until Commit; after an error, Abort.
func (w *RowWriter) Finish() (*format.FileMetaData, error) {
	w.closed = true
	if err := w.flushBatch(); err != nil {
		return nil, err
	}
	md, err := w.pw.Finish()
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", w.name, err)
	}
	return md, nil
}

// Commit completes the object of a finished file.
func (w *RowWriter) Commit(ctx context.Context) (objstore.Info, error) { return w.pw.Commit(ctx) }

// Abort cancels the upload for err (nil: aborted): no object appears.
func (w *RowWriter) Abort(err error) {
	w.closed = true
	w.pw.Abort(err)
}

// inOrderMaxBytes bounds the arrays of values WriteInOrder converts a
// file's rows into: a part of a staged file holds up to 128 MiB of events
// (by their estimate), and the arrays of a wide table's part of numbers
// could be larger than its events. A variable for tests.
var inOrderMaxBytes int64 = 64 << 20

// WriteInOrder writes n rows: row(order[0]), row(order[1]), ... (order is
// a permutation of 0..n-1; nil writes them as they come). Of a flat
// schema, it makes and converts the rows in index order first, each
// column's values into an array of n, and then writes the arrays in
// order. A caller whose rows' values lie in memory in index order and are
// written sorted by something else (a staged part, sorted by key) then
// reads each value where it lies, in turn, instead of jumping across its
// memory for every row; the jumps are left to the compact arrays, put in
// order one column at a time. The arrays hold n values per column, and one
// column more while they are ordered, at most inOrderMaxBytes: past that,
// and for other schemas, the rows are made and written one by one in
// order. After an error the file can only be aborted.
func (w *RowWriter) WriteInOrder(n int, order []int32, row func(i int) ([]any, error)) error {
	if !w.flat || int64(n)*int64(len(w.colBatch)+1)*int64(unsafe.Sizeof(parquet.Value{})) > inOrderMaxBytes {
		for j := range n {
			i := j
			if order != nil {
				i = int(order[j])
			}
			r, err := row(i)
			if err == nil {
				err = w.Write(r)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := w.writable(); err != nil {
		return err
	}
	cols := make([][]parquet.Value, len(w.colBatch))
	for c := range cols {
		cols[c] = w.opts.ValueArrays.get(n)
	}
	var sorted []parquet.Value // the ordering's spare array
	written := false           // every value was handed over, and cleared
	defer func() {
		for _, vals := range cols {
			if !written {
				clear(vals)
			}
			w.opts.ValueArrays.put(vals)
		}
		w.opts.ValueArrays.put(sorted) // cleared once ordering is done
	}()
	// The rows are taken a block at a time and converted a column at a
	// time: the block's values stay in the caches across its columns, and
	// each column's values are stored one after another rather than into
	// all the arrays at once for every row.
	nf := len(w.opts.Fields)
	blk := make([]any, inOrderBlock*nf)
	for i0 := 0; i0 < n; i0 += inOrderBlock {
		m := min(inOrderBlock, n-i0)
		var rowErr error
		for j := range m {
			r, err := row(i0 + j)
			if err == nil && w.opts.Check != nil {
				err = w.opts.Check(r, int64(i0+j))
			}
			if err != nil {
				m, rowErr = j, err // the rows before it are converted first
				break
			}
			copy(blk[j*nf:(j+1)*nf], r) // row may reuse its array
			if w.opts.Seen != nil {
				w.opts.Seen(r)
			}
		}
		if err := w.convertBlock(cols, blk[:m*nf], i0); err != nil {
			w.err = err
			return err
		}
		if rowErr != nil {
			w.err = rowErr
			return rowErr
		}
	}
	clear(blk)
	if order != nil {
		// Each column is put in order whole, one after the other: the
		// jumps stay within one column's array, which the caches hold,
		// rather than across all of them for every batch of rows.
		sorted = w.opts.ValueArrays.get(n)
		for c, vals := range cols {
			for j, i := range order {
				sorted[j] = vals[i]
			}
			cols[c], sorted = sorted, vals
		}
		clear(sorted)
	}
	// A batch at a time, column by column, as rowWritten hands batches
	// over (so that row groups end where rows written one by one would
	// end them). A whole batch goes to parquet-go straight from the
	// arrays, which hold its values in order already; a batch begun by
	// Write, or left for Write to finish, is made up in the column
	// batches.
	cws := w.pw.ColumnWriters()
	for j := 0; j < n; {
		m := min(n-j, writeBatchRows-w.nbatch)
		if m < writeBatchRows {
			for c, vals := range cols {
				w.colBatch[c] = append(w.colBatch[c], vals[j:j+m]...)
				clear(vals[j : j+m])
			}
			// rowWritten counts the batch's last row, and flushes.
			w.nbatch += m - 1
			w.rows += int64(m - 1)
			if err := w.rowWritten(); err != nil {
				return err
			}
			j += m
			continue
		}
		for c, vals := range cols {
			if _, err := cws[c].WriteRowValues(vals[j : j+m]); err != nil {
				w.err = fmt.Errorf("write %s: %w", w.name, err)
				return w.err
			}
			clear(vals[j : j+m]) // let go of the values' bytes
		}
		w.rows += int64(m)
		j += m
		if err := w.endFullRowGroup(); err != nil {
			return err
		}
	}
	written = true
	return nil
}

// inOrderBlock is how many rows WriteInOrder converts a column at a time.
const inOrderBlock = 256

// convertBlock converts the rows in blk (a row of len(Fields) values after
// another), rows i0, i0+1, ... of a WriteInOrder, into their places in the
// column arrays, a column at a time. Of several values that do not
// convert, the error is that of the first in row order, as converting row
// after row reports it.
func (w *RowWriter) convertBlock(cols [][]parquet.Value, blk []any, i0 int) error {
	nf := len(w.opts.Fields)
	m := len(blk) / max(nf, 1)
	for k, nd := range w.root {
		col := cols[nd.Leaf][i0 : i0+m]
		di := w.opts.Columns[k]
		for j := range col {
			if err := w.flatValue(&col[j], k, nd, blk[j*nf+di], int64(i0+j)); err != nil {
				// The block again, row after row, for the first.
				var v parquet.Value
				for j := range m {
					for k, nd := range w.root {
						if err := w.flatValue(&v, k, nd, blk[j*nf+w.opts.Columns[k]], int64(i0+j)); err != nil {
							return err
						}
					}
				}
				return err
			}
		}
	}
	return nil
}
