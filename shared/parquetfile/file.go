package parquetfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// File is a Parquet file of an object store, open for reading: its tail,
// footer and column chunk metadata checked (see ErrCorrupt), its pages to
// be checked as they are fetched (CheckPages, CheckRun, CheckPageIndex).
// Before each row group the byte ranges of the wanted column chunks are
// fetched with a few ranged reads (Prefetch) and served from memory, so
// memory is bounded by a row group and remote stores see few requests.
// Unlike objstore.NewReaderAt it reads exactly what is asked: no
// read-ahead block around a small read, so a row group skipped is a row
// group not fetched. A File is read by one goroutine at a time.
type File struct {
	ctx    context.Context
	store  objstore.Store
	name   string
	size   int64
	chunks []cachedRange
	buf    []byte // backs chunks
	pf     *parquet.File
	// pages checks column chunks before parquet-go reads them.
	pages *pageChecker
}

// Open opens the Parquet object name of the given size (a Stat finds it
// when size is not positive): it reads the file's end, checks the footer
// before parquet-go decodes it and the column chunk metadata after, and
// returns the file ready to read. Page indexes and bloom filters are read
// when asked for (PageIndex, BloomFilters).
func Open(ctx context.Context, store objstore.Store, name string, size int64) (*File, error) {
	if size <= 0 {
		info, err := store.Stat(ctx, name)
		if err != nil {
			return nil, err
		}
		size = info.Size
	}
	f := &File{ctx: ctx, store: store, name: name, size: size}
	footerStart, err := f.loadFooter()
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	f.pf, err = openFile(f, size)
	f.Release()
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	if err := checkMetadata(f.pf, footerStart); err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	f.pages = newPageChecker(f.pf, footerStart)
	return f, nil
}

// openFile opens a file whose footer loadFooter checked, turning a panic
// of parquet-go on a malformed footer into an error.
func openFile(r io.ReaderAt, size int64) (f *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, Corruptf("%v", p)
		}
	}()
	return parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.OptimisticRead(true))
}

// Parquet returns the file as parquet-go opened it. Its column chunks'
// pages are to be read through this File, after CheckPages (or
// CheckRun) said they may be.
func (f *File) Parquet() *parquet.File { return f.pf }

// FooterStart returns the offset where the footer starts: everything a
// column chunk, page index or bloom filter spans lies before it.
func (f *File) FooterStart() int64 { return f.pages.footerStart }

// loadFooter reads the end of the file, with the footer, into memory for
// parquet-go to open it from, and returns the offset where the footer
// starts: a footer length that does not fit in the file is an error here,
// where parquet-go would allocate it. Most footers fit in the first read.
func (r *File) loadFooter() (int64, error) {
	n := min(r.size, TailBytes)
	if err := r.Prefetch([][2]int64{{r.size - n, r.size}}); err != nil {
		return 0, err
	}
	var tail []byte
	if len(r.chunks) > 0 {
		tail = r.chunks[0].data
	}
	footerStart, err := checkTail(tail, r.size)
	if err != nil {
		return 0, err
	}
	if footerStart < r.size-n {
		if err := r.Prefetch([][2]int64{{footerStart, r.size}}); err != nil {
			return 0, err
		}
	}
	footer, err := r.Bytes(footerStart, r.size-8)
	if err != nil {
		return 0, err
	}
	if err := checkFooter(footer); err != nil {
		return 0, err
	}
	return footerStart, nil
}

// CheckPages checks the pages of column chunk c of row group g before
// parquet-go reads them (see pageChecker.check), from the prefetched
// ranges.
func (r *File) CheckPages(g, c int) error {
	return r.pages.check(g, c, r.Bytes)
}

// CheckRun checks the pages of b, a run of whole pages of leaf column c of
// row group g that starts at offset start (see pageChecker.checkRun).
func (r *File) CheckRun(g, c int, start int64, b []byte) error {
	return r.pages.checkRun(g, c, start, b)
}

// CheckPageIndex checks the column and offset indexes of column chunk c
// of row group g before parquet-go reads them (see
// pageChecker.checkPageIndex), from the prefetched ranges.
func (r *File) CheckPageIndex(g, c int) error {
	return r.pages.checkPageIndex(g, c, r.Bytes)
}

// PageIndex returns the checked column and offset indexes of column chunk
// c of row group g, from the prefetched ranges: nil where the chunk has
// none, and no column index unless withColumnIndex (see
// pageChecker.pageIndex).
func (r *File) PageIndex(g, c int, withColumnIndex bool) (*format.ColumnIndex, *format.OffsetIndex, error) {
	return r.pages.pageIndex(g, c, r.Bytes, withColumnIndex)
}

// ChunkRange returns the byte range [start, end) of column chunk c of row
// group g, checked to lie before the footer.
func (r *File) ChunkRange(g, c int) (int64, int64, error) {
	return columnChunkRange(&r.pf.Metadata().RowGroups[g], c, r.pages.footerStart)
}

// Bytes returns the bytes [start, end) of the file: from the prefetched
// ranges when they hold them, read otherwise. They may point into the
// prefetched ranges, reused after Release.
func (r *File) Bytes(start, end int64) ([]byte, error) {
	for _, ch := range r.chunks {
		if start >= ch.off && end <= ch.off+int64(len(ch.data)) {
			return ch.data[start-ch.off : end-ch.off], nil
		}
	}
	b := make([]byte, end-start)
	if err := r.readDirect(b, start); err != nil {
		return nil, err
	}
	return b, nil
}

type cachedRange struct {
	off  int64
	data []byte
}

// prefetchGapBytes is the largest gap between two wanted byte ranges that
// prefetch reads through to fetch them as one range.
//
// On a remote store a ranged read costs a round trip (tens of ms on GCS)
// plus its bytes (about 100 MB/s per stream); prefetch issues its ranges
// concurrently (prefetchRequests at a time), so one more range costs little
// more than its own request overhead, while reading through a gap costs the
// gap's bytes: 128 KiB is about a millisecond of transfer. A dense read (the
// selected column chunks of a row group) still comes in one or a few
// ranges; a sparse read through the page index (pages a few KiB long,
// tens of KiB apart) fetches its pages and not the whole chunk between
// them. The old 1 MiB gap made a lookup of two columns fetch nearly the
// whole file.
const prefetchGapBytes = 128 << 10

// prefetchRequests bounds the ranged reads one prefetch runs at once.
const prefetchRequests = 8

// Prefetch loads the given [start, end) ranges, merging those less than
// prefetchGapBytes apart, and reads the merged ranges concurrently.
func (r *File) Prefetch(ranges [][2]int64) error {
	r.chunks = r.chunks[:0]
	sort.Slice(ranges, func(i, j int) bool { return ranges[i][0] < ranges[j][0] })
	var merged [][2]int64
	for _, rg := range ranges {
		if n := len(merged); n > 0 && rg[0] <= merged[n-1][1]+prefetchGapBytes {
			merged[n-1][1] = max(merged[n-1][1], rg[1])
			continue
		}
		merged = append(merged, rg)
	}
	var total int64
	for _, rg := range merged {
		total += max(min(rg[1], r.size)-max(rg[0], 0), 0)
	}
	// One buffer, reused from row group to row group: a rewrite prefetches
	// every row group of a file it copies, and allocating each anew made
	// the collector run (and mark the merge's batch) every few row groups.
	if int64(cap(r.buf)) < total {
		r.buf = make([]byte, total)
	}
	buf := r.buf[:0]
	for _, rg := range merged {
		start, end := max(rg[0], 0), min(rg[1], r.size)
		if end <= start {
			continue
		}
		data := buf[len(buf) : len(buf)+int(end-start)]
		buf = buf[:len(buf)+int(end-start)]
		r.chunks = append(r.chunks, cachedRange{off: start, data: data})
	}
	if len(r.chunks) == 1 {
		if err := r.readDirect(r.chunks[0].data, r.chunks[0].off); err != nil {
			r.chunks = r.chunks[:0]
			return err
		}
		return nil
	}
	var g errgroup.Group
	g.SetLimit(prefetchRequests)
	for _, c := range r.chunks {
		g.Go(func() error { return r.readDirect(c.data, c.off) })
	}
	if err := g.Wait(); err != nil {
		r.chunks = r.chunks[:0]
		return err
	}
	return nil
}

// Release forgets the prefetched ranges; their buffer is reused by the
// next Prefetch, so nothing read from it may be kept beyond this call.
func (r *File) Release() { r.chunks = r.chunks[:0] }

// ReadAt reads from the prefetched ranges when they hold p, from the
// store otherwise.
func (r *File) ReadAt(p []byte, off int64) (int, error) {
	for _, c := range r.chunks {
		if off >= c.off && off+int64(len(p)) <= c.off+int64(len(c.data)) {
			return copy(p, c.data[off-c.off:]), nil
		}
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := len(p)
	if off+int64(n) > r.size {
		n = int(r.size - off)
	}
	if err := r.readDirect(p[:n], off); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r *File) readDirect(p []byte, off int64) error {
	rc, err := r.store.NewReader(r.ctx, r.name, off, int64(len(p)))
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, p); err != nil {
		return fmt.Errorf("read %d bytes at %d: %w", len(p), off, err)
	}
	return nil
}

// errNotPrefetched is returned by a read of bytes that a sparse read did
// not fetch: a bug in the ranges it computed, never more I/O.
var errNotPrefetched = errors.New("read outside the prefetched pages")

// Prefetched returns a reader of the ranges prefetched last, for
// parquet-go's page reads; a read running past a range's end gets what the
// range holds and io.EOF (parquet-go's buffered reader reads ahead of a
// page), a read outside them an error, never more I/O.
func (r *File) Prefetched() io.ReaderAt { return prefetchedReaderAt{r} }

type prefetchedReaderAt struct{ r *File }

func (p prefetchedReaderAt) ReadAt(b []byte, off int64) (int, error) {
	for _, c := range p.r.chunks {
		if off >= c.off && off < c.off+int64(len(c.data)) {
			n := copy(b, c.data[off-c.off:])
			if n < len(b) {
				return n, io.EOF
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: %d bytes at %d", errNotPrefetched, len(b), off)
}

// OpenBytes opens a Parquet file held in memory (a checkpoint) and checks
// it whole: its tail, footer and column chunk metadata, then every page,
// before any is decoded. Page indexes and bloom filters are not read: they
// are of no use to a full scan, and their offsets and lengths would be
// more fields to distrust. A malformed footer may still make parquet-go
// panic: the caller, which decodes the rows next, recovers.
func OpenBytes(b []byte) (*parquet.File, error) {
	footerStart, err := checkTail(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	if err := checkFooter(b[footerStart : len(b)-8]); err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, err
	}
	if err := checkMetadata(f, footerStart); err != nil {
		return nil, err
	}
	pc := newPageChecker(f, footerStart)
	inMemory := func(start, end int64) ([]byte, error) { return b[start:end], nil }
	for g, rg := range f.Metadata().RowGroups {
		for c := range rg.Columns {
			if err := pc.check(g, c, inMemory); err != nil {
				return nil, fmt.Errorf("row group %d: %w", g, err)
			}
		}
	}
	return f, nil
}

// SetContext makes ctx the context of the File's reads from now on: a
// File held open between reads (a merge's staged parts) is read under the
// context of each read.
func (r *File) SetContext(ctx context.Context) { r.ctx = ctx }

// DropBuffer forgets the prefetched ranges and frees their buffer: a File
// held open between reads holds no read buffer.
func (r *File) DropBuffer() { r.buf, r.chunks = nil, nil }

// BufferBytes returns the size of the read buffer the File holds.
func (r *File) BufferBytes() int { return cap(r.buf) }
