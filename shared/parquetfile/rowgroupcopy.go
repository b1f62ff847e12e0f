package parquetfile

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/parquet-go/parquet-go"
)

// flushedForRowGroup readies the writer for a row group written whole: the
// rows written one by one so far are handed to parquet-go first.
func (w *RowWriter) flushedForRowGroup() error {
	if err := w.writable(); err != nil {
		return err
	}
	return w.flushBatch()
}

// WriteRowGroup appends every row of rg, a row group of another Parquet
// file whose schema equals this file's (parquet.EqualNodes), as a row group
// of its own. parquet-go splices its compressed pages verbatim when the
// source's codec, encodings and page version match this writer's, and
// re-encodes it otherwise. The rows are not seen (Seen is not called).
func (w *RowWriter) WriteRowGroup(rg parquet.RowGroup) error {
	if err := w.flushedForRowGroup(); err != nil {
		return err
	}
	if err := w.pw.WriteRowGroup(rg); err != nil {
		w.err = fmt.Errorf("write %s: copy row group: %w", w.name, err)
		return w.err
	}
	w.rows += rg.NumRows()
	w.rgStart, w.rgRows = w.pw.Size(), w.rows
	return nil
}

// KeptLeaf says what WriteRowGroupKept takes of a leaf column's kept
// values besides their null count: their extremes (Bounds), in the order
// NewExtremes(chunk type, WideDecimal, Float) gives.
type KeptLeaf struct {
	Bounds, WideDecimal, Float bool
}

// KeptValues are what WriteRowGroupKept took of a leaf column's kept
// values.
type KeptValues struct {
	// Values counts them, Nulls their nulls.
	Values, Nulls int64
	// Extremes are their extremes, nil unless the leaf's Bounds asked.
	Extremes *Extremes
}

// WriteRowGroupKept appends the rows of rg, a row group of another Parquet
// file whose schema equals this file's and whose leaves are flat (one value
// per row), that dropped does not mark, as a row group of its own. It copies
// column by column: each chunk's values are decoded and written to this
// file's column writers without assembling rows, so a kept row costs a
// decode and an encode of its values and no Go value per field. leaves
// says, one per leaf column, what is taken of the kept values as they
// pass; done is called with it once a column is copied (on the goroutine
// that copied it, columns being copied on all cores), and its error is the
// column's. It returns the number of rows kept.
func (w *RowWriter) WriteRowGroupKept(rg parquet.RowGroup, dropped []bool, leaves []KeptLeaf, done func(k int, kept *KeptValues) error) (int64, error) {
	if err := w.flushedForRowGroup(); err != nil {
		return 0, err
	}
	if w.rows > w.rgRows {
		// Rows written one by one form a row group of their own.
		if err := w.pw.Flush(); err != nil {
			w.err = fmt.Errorf("write %s: flush row group: %w", w.name, err)
			return 0, w.err
		}
	}
	chunks := rg.ColumnChunks()
	cols := w.pw.ColumnWriters()
	if len(chunks) != len(cols) || len(chunks) != len(leaves) {
		return 0, fmt.Errorf("write %s: row group has %d column chunks, file has %d columns", w.name, len(chunks), len(cols))
	}
	if int64(len(dropped)) != rg.NumRows() {
		return 0, fmt.Errorf("write %s: drop mask of %d rows for a row group of %d", w.name, len(dropped), rg.NumRows())
	}
	// Columns are independent until the row group is flushed: each has its
	// own pages to read and its own column writer (parquet-go's shared
	// buffers are pools), so they are copied on all cores.
	counts := make([]int64, len(chunks))
	errs := make([]error, len(chunks))
	next := make(chan int, len(chunks))
	for k := range chunks {
		next <- k
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(chunks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]parquet.Value, 4096)
			out := make([]parquet.Value, 0, len(buf))
			for k := range next {
				counts[k], errs[k] = copyKeptValuesSafely(chunks[k], cols[k], dropped, leaves[k], k, done, buf, out)
			}
		}()
	}
	wg.Wait()
	var kept int64
	for k, err := range errs {
		if err != nil {
			w.err = fmt.Errorf("write %s: column %d: %w", w.name, k, err)
			return 0, w.err
		}
		if k > 0 && counts[k] != kept {
			w.err = fmt.Errorf("write %s: column %d has %d kept values, column 0 has %d", w.name, k, counts[k], kept)
			return 0, w.err
		}
		kept = counts[k]
	}
	if err := w.pw.Flush(); err != nil {
		w.err = fmt.Errorf("write %s: flush row group: %w", w.name, err)
		return 0, w.err
	}
	w.rows += kept
	w.rgStart, w.rgRows = w.pw.Size(), w.rows
	return kept, nil
}

// copyKeptValuesSafely is copyKeptValues with a panic of parquet-go (on a
// corrupt page it decodes) turned into the column's error: a panic on this
// worker goroutine would end the process.
func copyKeptValuesSafely(c parquet.ColumnChunk, cw *parquet.ColumnWriter, dropped []bool, leaf KeptLeaf, k int, done func(int, *KeptValues) error, buf, out []parquet.Value) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, Corruptf("copy values: %v", p)
		}
	}()
	return copyKeptValues(c, cw, dropped, leaf, k, done, buf, out)
}

// copyKeptValues writes the values of the rows of one flat column chunk
// (leaf k) that dropped does not mark to cw, takes what leaf asks of them
// and hands it to done. It returns the number of values written.
func copyKeptValues(c parquet.ColumnChunk, cw *parquet.ColumnWriter, dropped []bool, leaf KeptLeaf, k int, done func(int, *KeptValues) error, buf, out []parquet.Value) (int64, error) {
	minMax := leaf.Bounds
	ext := NewExtremes(c.Type(), leaf.WideDecimal, leaf.Float)
	var s KeptValues
	var row, written int64
	pages := c.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read page: %w", err)
		}
		vr := p.Values()
		for {
			n, rerr := vr.ReadValues(buf)
			for _, v := range buf[:n] {
				if row >= int64(len(dropped)) {
					parquet.Release(p)
					return 0, fmt.Errorf("more values than the row group's %d rows: not a flat column", len(dropped))
				}
				if !dropped[row] {
					if v.IsNull() {
						s.Nulls++
					} else if minMax {
						ext.Add(v)
					}
					out = append(out, v)
				}
				row++
			}
			if len(out) > 0 {
				if _, err := cw.WriteRowValues(out); err != nil {
					parquet.Release(p)
					return 0, fmt.Errorf("write values: %w", err)
				}
				written += int64(len(out))
				out = out[:0]
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				parquet.Release(p)
				return 0, fmt.Errorf("read values: %w", rerr)
			}
		}
		ext.EndPage() // the extremes' values point into the page
		parquet.Release(p)
	}
	if row != int64(len(dropped)) {
		return 0, fmt.Errorf("%d values for a row group of %d rows", row, len(dropped))
	}
	s.Values = written
	if minMax {
		s.Extremes = &ext
	}
	return written, done(k, &s)
}
