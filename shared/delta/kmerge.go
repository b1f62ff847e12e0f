package delta

import (
	"container/heap"
	"context"
	"fmt"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
	"golang.org/x/sync/errgroup"
)

// DefaultMergeFanIn is how many files ReadMerged reads at once unless told
// otherwise. After a backlog a compaction can have thousands of small
// files to merge, and every file read at once holds a row group in memory.
const DefaultMergeFanIn = 16

// mergeBufferRows is how many rows each input of a merge reads ahead.
const mergeBufferRows = 64

// MergeOptions configure ReadMerged.
type MergeOptions struct {
	// Less orders the rows; every file's rows must be in that order
	// already (as merges and compaction write them). Rows that compare
	// equal come in file order; nil emits the files one after the other.
	Less func(a, b []any) bool
	// FanIn caps how many files are read at once; 0 means
	// DefaultMergeFanIn, and an ordered merge reads at least two.
	FanIn int
}

// ReadMerged streams the rows of files of the table described by md to
// emit, in the order opts.Less gives: a k-way merge of sorted files. Each
// file is read by its own goroutine a few rows ahead, so memory holds about
// a row group per file read, and at most opts.FanIn files are read at once,
// whatever their number and sizes.
//
// Files beyond the fan-in are merged in passes: runs of consecutive files
// are merged into intermediate sorted files in store, as few runs as bring
// the inputs down to the fan-in, so a merge of up to FanIn² files writes a
// row once more at most, of up to FanIn³ twice, and so on. Intermediate
// files are deleted once read and when ReadMerged returns; one left by a
// crash is unreferenced, and vacuum deletes it. Rows that compare equal
// still come in file order, as each run is merged in order and takes its
// place among the inputs.
//
// The first error, of a reader or of emit, ends the merge; every reader has
// stopped when ReadMerged returns.
func ReadMerged(ctx context.Context, store objstore.Store, md Metadata, files []Add, opts MergeOptions, emit func(row []any) error) error {
	fanIn := opts.FanIn
	if fanIn <= 0 {
		fanIn = DefaultMergeFanIn
	}
	inputs := make([]mergeInput, len(files))
	for i, f := range files {
		inputs[i] = mergeInput{md: md, add: f}
	}
	if opts.Less == nil {
		// Files one after the other need no intermediate: a window of
		// them is read ahead while its first is emitted.
		for i := 0; i < len(inputs); i += fanIn {
			if err := mergeInputs(ctx, store, inputs[i:min(i+fanIn, len(inputs))], nil, emit); err != nil {
				return err
			}
		}
		return nil
	}
	fanIn = max(fanIn, 2)
	m := &multiPass{store: store, less: opts.Less}
	defer m.discard(ctx)
	for len(inputs) > fanIn {
		var err error
		if inputs, err = m.pass(ctx, inputs, fanIn); err != nil {
			return err
		}
	}
	return mergeInputs(ctx, store, inputs, opts.Less, emit)
}

// mergeInput is a file to merge and the metadata it is read with.
type mergeInput struct {
	md  Metadata
	add Add
	// temp marks an intermediate file of a multi-pass merge.
	temp bool
}

// multiPass writes the intermediate files of a merge of more files than
// its fan-in.
type multiPass struct {
	store objstore.Store
	less  func(a, b []any) bool
	// temps are the intermediate files written and not deleted yet.
	temps []Add
}

// pass merges runs of consecutive inputs into one intermediate file each,
// as few runs as bring the inputs down to fanIn, or as many as fit when
// one pass cannot, and returns the inputs of the next pass.
func (m *multiPass) pass(ctx context.Context, inputs []mergeInput, fanIn int) ([]mergeInput, error) {
	excess := len(inputs) - fanIn
	var next []mergeInput
	for i := 0; i < len(inputs); {
		n := min(fanIn, excess+1, len(inputs)-i)
		if n < 2 {
			next = append(next, inputs[i:]...)
			break
		}
		out, err := m.spill(ctx, inputs[i:i+n])
		if err != nil {
			return nil, err
		}
		next = append(next, out)
		excess -= n - 1
		i += n
	}
	return next, nil
}

// spill merges inputs into one intermediate file and deletes those of them
// that are intermediate files. The file stores every column, partition
// columns included, so that inputs of several partitions keep their rows'
// order in one file; it is read back with metadata that says so.
func (m *multiPass) spill(ctx context.Context, inputs []mergeInput) (mergeInput, error) {
	md := inputs[0].md
	md.PartitionColumns = nil
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		return mergeInput{}, fmt.Errorf("merge %d files: %w", len(inputs), err)
	}
	w, err := NewFileWriter(ctx, m.store, WriteOptions{Schema: schema, ColumnMappingMode: ColumnMappingMode(md)})
	if err != nil {
		return mergeInput{}, fmt.Errorf("merge %d files: %w", len(inputs), err)
	}
	if err := mergeInputs(ctx, m.store, inputs, m.less, w.Write); err != nil {
		w.Abort()
		return mergeInput{}, err
	}
	add, err := w.Close(ctx)
	if err != nil {
		return mergeInput{}, fmt.Errorf("merge %d files into %s: %w", len(inputs), w.Name(), err)
	}
	m.temps = append(m.temps, add)
	for _, in := range inputs {
		if in.temp {
			m.forget(ctx, in.add)
		}
	}
	return mergeInput{md: md, add: add, temp: true}, nil
}

// forget deletes an intermediate file that has been read.
func (m *multiPass) forget(ctx context.Context, add Add) {
	for i, t := range m.temps {
		if t.Path == add.Path {
			m.temps = append(m.temps[:i], m.temps[i+1:]...)
			DiscardFiles(ctx, m.store, []Add{add})
			return
		}
	}
}

// discard deletes the intermediate files left, even after a cancel.
func (m *multiPass) discard(ctx context.Context) {
	DiscardFiles(context.WithoutCancel(ctx), m.store, m.temps)
	m.temps = nil
}

// mergeInputs streams the rows of inputs to emit in the order less gives,
// reading every input at once: one goroutine each, owned by the merge.
func mergeInputs(ctx context.Context, store objstore.Store, inputs []mergeInput, less func(a, b []any) bool, emit func(row []any) error) error {
	ctx, cancel := context.WithCancel(ctx)
	// The readers must all run for the merge to advance: their number is
	// bounded by the caller's fan-in, not by a limit here.
	var g errgroup.Group
	defer func() {
		// Stop the readers and wait for each: a reader blocked on a full
		// buffer sees the cancel.
		cancel()
		_ = g.Wait() // each reader's error is its stream's, seen by the merge
	}()
	h := &mergeHeap{less: less}
	streams := make([]*mergeStream, len(inputs))
	for i, in := range inputs {
		s := &mergeStream{ch: make(chan []any, mergeBufferRows), seq: i}
		streams[i] = s
		g.Go(func() error {
			defer close(s.ch)
			s.err = ReadFile(ctx, store, in.md, in.add, ReadOptions{}, func(row []any) error {
				select {
				case s.ch <- row:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			return nil
		})
	}
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

// mergeStream is one input of a merge and its next row.
type mergeStream struct {
	ch   chan []any
	err  error // the reader's result, set before ch is closed
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
	return false, s.err
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
