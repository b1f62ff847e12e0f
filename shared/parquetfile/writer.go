package parquetfile

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/format"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// WriterOptions configure a Writer. Columns are named as in the file.
type WriterOptions struct {
	// Codec compresses the pages (see WriteCodec).
	Codec compress.Codec
	// CreatedBy and Version name the writing application in the footer's
	// created_by.
	CreatedBy, Version string
	// PageBytes is the buffered (uncompressed) size at which a data page of
	// a column is flushed, for every column (parquet-go has no per-column
	// page size); 0 means parquet-go's 256 KiB. With it set, the
	// byte-array page bounds of LookupColumns keep LookupBoundBytes bytes.
	PageBytes int
	// LookupColumns are the top-level columns readers look values up in.
	LookupColumns []string
	// BloomFilterColumns are top-level primitive columns that get a
	// split-block bloom filter of BloomFilterBitsPerValue bits per value in
	// every row group.
	BloomFilterColumns      []string
	BloomFilterBitsPerValue uint
}

// LookupBoundBytes is how long a byte-array page bound in the column index
// may be for the columns readers look values up in (LookupColumns) when
// PageBytes is set. parquet-go truncates bounds to 16 bytes, which leaves
// keys with a longer common prefix ("customer-0000001234") the same bounds
// on every page, and a page-index read nothing to skip; 64 bytes hold a
// UUID or most business keys whole. Other columns keep 16 bytes: the index
// of every column is fetched with the footer's neighbourhood, and it grows
// with the pages.
const LookupBoundBytes = 64

// Writer streams a Parquet file into an object of a store as it is written:
// it buffers at most one row group. Values go in column by column
// (ColumnWriters) or as whole row groups of other files (WriteRowGroup).
// Finish ends the file, Commit then completes the object; Abort, at any
// point before Commit, makes sure no object appears. A Writer is not safe
// for concurrent use.
type Writer struct {
	name string
	pw   *parquet.GenericWriter[any]
	pipe *io.PipeWriter
	done chan writeResult
}

type writeResult struct {
	info objstore.Info
	err  error
}

// NewWriter starts the file name (object name in store) of schema.
func NewWriter(ctx context.Context, store objstore.Store, name string, schema *parquet.Schema, opts WriterOptions) *Writer {
	pr, pipeW := io.Pipe()
	w := &Writer{name: name, pipe: pipeW, done: make(chan writeResult, 1)}
	go func() {
		info, err := store.Write(ctx, name, pr, objstore.WriteOptions{IfAbsent: true, ContentType: "application/vnd.apache.parquet"})
		if err != nil {
			pr.CloseWithError(err)
		} else {
			pr.Close()
		}
		w.done <- writeResult{info, err}
	}()
	// Rows go in as values of columns or whole row groups, never as Go
	// values, so the writer's type parameter is any.
	w.pw = parquet.NewGenericWriter[any](pipeW, append([]parquet.WriterOption{
		schema,
		parquet.Compression(opts.Codec),
		parquet.DataPageVersion(1),
		// Page bounds go to the column index (the page index readers
		// prune by); repeating them in every page header cost a second
		// pass over each byte-array page.
		parquet.DataPageStatistics(false),
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
		parquet.CreatedBy(opts.CreatedBy, opts.Version, ""),
	}, append(bloomFilterOptions(opts), pageOptions(opts)...)...)...)
	return w
}

// bloomFilterOptions returns the parquet-go writer options of
// opts.BloomFilterColumns.
func bloomFilterOptions(opts WriterOptions) []parquet.WriterOption {
	if len(opts.BloomFilterColumns) == 0 {
		return nil
	}
	var filters []parquet.BloomFilterColumn
	for _, name := range opts.BloomFilterColumns {
		filters = append(filters, parquet.SplitBlockFilter(opts.BloomFilterBitsPerValue, name))
	}
	return []parquet.WriterOption{
		parquet.BloomFilters(filters...),
		parquet.DeferBloomFiltersWithBuffers(parquet.NewBufferPool()),
	}
}

// pageOptions returns the writer options of opts.PageBytes.
func pageOptions(opts WriterOptions) []parquet.WriterOption {
	if opts.PageBytes <= 0 {
		return nil
	}
	lookup := map[string]bool{}
	for _, name := range opts.LookupColumns {
		lookup[name] = true
	}
	return []parquet.WriterOption{
		parquet.PageBufferSize(opts.PageBytes),
		parquet.ColumnIndexSizeLimit(func(path []string) int {
			if len(path) == 1 && lookup[path[0]] {
				return LookupBoundBytes
			}
			return parquet.DefaultColumnIndexSizeLimit
		}),
	}
}

// WriteCodec returns the codec of a compression's name (snappy, zstd,
// gzip, none) and the suffix Spark gives its files' names (".snappy").
func WriteCodec(name string) (compress.Codec, string, error) {
	switch name {
	case "snappy":
		return &fastSnappy{}, ".snappy", nil
	case "zstd":
		return &parquet.Zstd, ".zstd", nil
	case "gzip":
		return &parquet.Gzip, ".gz", nil
	case "none":
		return &parquet.Uncompressed, "", nil
	}
	return nil, "", fmt.Errorf("unknown compression %q", name)
}

// fastSnappy writes Snappy blocks at s2's standard Snappy level.
// parquet-go's Snappy codec encodes at the "better" level, which took about
// a seventh of a merge's CPU for pages a few percent smaller; a merge
// re-encodes row groups on every batch, so the CPU matters more than those
// bytes. The blocks are plain Snappy: any reader decodes them, and
// parquet-go still splices row groups of either level verbatim (it matches
// codecs by their Parquet enum).
type fastSnappy struct{ snappy.Codec }

func (*fastSnappy) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:0], src), nil
}

// Schema is the file's Parquet schema.
func (w *Writer) Schema() *parquet.Schema { return w.pw.Schema() }

// Size is how many bytes the file holds so far, the row group being
// written included (its buffered, uncompressed size).
func (w *Writer) Size() int64 { return w.pw.Size() }

// ColumnWriters are the writers of the leaf columns, in order: each takes
// its column's values of whole rows (WriteRowValues).
func (w *Writer) ColumnWriters() []*parquet.ColumnWriter { return w.pw.ColumnWriters() }

// Flush ends the row group being written.
func (w *Writer) Flush() error { return w.pw.Flush() }

// WriteRowGroup appends every row of rg, a row group of another Parquet
// file whose schema equals this file's (parquet.EqualNodes), as a row
// group of its own. parquet-go splices its compressed pages verbatim when
// the source's codec, encodings and page version match this writer's, and
// re-encodes it otherwise; a panic of parquet-go on a corrupt page it
// reads is an ErrCorrupt.
func (w *Writer) WriteRowGroup(rg parquet.RowGroup) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Corruptf("%v", p)
		}
	}()
	_, err = w.pw.WriteRowGroup(rg)
	return err
}

// Finish writes the rest of the file and its footer, and returns the
// footer. The object is not complete until Commit.
func (w *Writer) Finish() (*format.FileMetaData, error) {
	if err := w.pw.Close(); err != nil {
		return nil, fmt.Errorf("finish parquet: %w", err)
	}
	return w.pw.File().Metadata(), nil
}

// Commit completes the object of a finished file.
func (w *Writer) Commit(ctx context.Context) (objstore.Info, error) {
	w.pipe.Close()
	select {
	case res := <-w.done:
		return res.info, res.err
	case <-ctx.Done():
		w.pipe.CloseWithError(ctx.Err())
		<-w.done
		return objstore.Info{}, ctx.Err()
	}
}

// Abort cancels the upload for err: no object appears.
func (w *Writer) Abort(err error) {
	if err == nil {
		err = errors.New("file writer aborted")
	}
	w.pipe.CloseWithError(err)
	<-w.done
}
