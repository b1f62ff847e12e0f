package delta

import (
	"container/heap"
	"context"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// mergeBufferRows is how many rows each input of ReadMerged reads ahead.
const mergeBufferRows = 64

// MergeOptions configure ReadMerged.
type MergeOptions struct {
	// Less orders the rows; every file's rows must be in that order
	// already (as merges and compaction write them). Rows that compare
	// equal come in file order; nil emits the files one after the other.
	Less func(a, b []any) bool
}

// ReadMerged streams the rows of files of the table described by md to
// emit, in the order opts.Less gives: a k-way merge of sorted files. Each
// file is read by its own goroutine a few rows ahead, so memory holds
// about a row group per input whatever the files' sizes. The first error,
// of a reader or of emit, ends the merge; every reader has stopped when
// ReadMerged returns.
func ReadMerged(ctx context.Context, store objstore.Store, md Metadata, files []Add, opts MergeOptions, emit func(row []any) error) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	h := &mergeHeap{less: opts.Less}
	streams := make([]*mergeStream, len(files))
	for i, f := range files {
		s := &mergeStream{ch: make(chan []any, mergeBufferRows), errc: make(chan error, 1), seq: i}
		streams[i] = s
		go func() {
			defer close(s.ch)
			s.errc <- ReadFile(ctx, store, md, f, ReadOptions{}, func(row []any) error {
				select {
				case s.ch <- row:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	defer func() {
		// Stop the readers and wait for each: a reader blocked on a full
		// buffer sees the cancel, and its channel closes when it is done.
		cancel()
		for _, s := range streams {
			for range s.ch {
			}
		}
	}()
	for _, s := range streams {
		ok, err := s.advance()
		if err != nil {
			return err
		}
		if ok {
			h.streams = append(h.streams, s)
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		s := h.streams[0]
		if err := emit(s.head); err != nil {
			return err
		}
		ok, err := s.advance()
		switch {
		case err != nil:
			return err
		case ok:
			heap.Fix(h, 0)
		default:
			heap.Pop(h)
		}
	}
	return nil
}

// mergeStream is one input of ReadMerged and its next row.
type mergeStream struct {
	ch   chan []any
	errc chan error // the reader's result, once ch is closed
	head []any
	seq  int
}

// advance moves to the stream's next row; false at the end of the file.
// A reader that failed closed its channel early: its error, not a shorter
// file, is the result.
func (s *mergeStream) advance() (bool, error) {
	row, ok := <-s.ch
	if ok {
		s.head = row
		return true, nil
	}
	s.head = nil
	return false, <-s.errc
}

// mergeHeap orders streams by their next row, then by input.
type mergeHeap struct {
	streams []*mergeStream
	less    func(a, b []any) bool
}

func (h *mergeHeap) Len() int { return len(h.streams) }
func (h *mergeHeap) Less(i, j int) bool {
	a, b := h.streams[i], h.streams[j]
	if h.less != nil {
		if h.less(a.head, b.head) {
			return true
		}
		if h.less(b.head, a.head) {
			return false
		}
	}
	return a.seq < b.seq
}
func (h *mergeHeap) Swap(i, j int) { h.streams[i], h.streams[j] = h.streams[j], h.streams[i] }
func (h *mergeHeap) Push(x any)    { h.streams = append(h.streams, x.(*mergeStream)) }
func (h *mergeHeap) Pop() any {
	s := h.streams[len(h.streams)-1]
	h.streams = h.streams[:len(h.streams)-1]
	return s
}
