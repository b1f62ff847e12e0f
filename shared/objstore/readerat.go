package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
)

// Read-ahead of the ReaderAt: parquet readers issue many small reads (the
// 8-byte tail, the footer, pages through a 4 KiB buffer); each would be a
// round trip to GCS. Small reads fetch a whole block instead, and the few
// most recent blocks are kept so that interleaved column reads still hit.
const (
	readAheadBytes  = 256 << 10
	readAheadBlocks = 4
)

// NewReaderAt returns an io.ReaderAt over the object name of the given size,
// implemented with ranged reads. It is safe for concurrent use. The object
// must not change while it is read (Delta data files never do): each read
// fetches whatever the name holds at that moment.
func NewReaderAt(ctx context.Context, s Store, name string, size int64) io.ReaderAt {
	return &readerAt{ctx: ctx, s: s, name: name, size: size}
}

type readerAt struct {
	ctx  context.Context
	s    Store
	name string
	size int64

	mu     sync.Mutex
	blocks []block // most recently used last
}

type block struct {
	off  int64
	data []byte
}

// ReadAt implements io.ReaderAt.
func (r *readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s at %d: negative offset", r.name, off)
	}
	if off >= r.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	if n, ok := r.cached(p[:want], off); ok {
		return n, eofIfShort(n, len(p))
	}
	if want >= readAheadBytes {
		n, err := r.fetch(p[:want], off)
		if err != nil {
			return n, err
		}
		return n, eofIfShort(n, len(p))
	}
	// Fetch a block around the read; near the end, end the block at the end
	// of the object so that the tail and the footer land in one block.
	start := off
	if start+readAheadBytes > r.size {
		start = max(r.size-readAheadBytes, 0)
	}
	buf := make([]byte, min(readAheadBytes, r.size-start))
	n, err := r.fetch(buf, start)
	if err != nil {
		return 0, err
	}
	r.remember(block{off: start, data: buf[:n]})
	n = copy(p[:want], buf[off-start:])
	return n, eofIfShort(n, len(p))
}

func eofIfShort(n, want int) error {
	if n < want {
		return io.EOF
	}
	return nil
}

func (r *readerAt) cached(p []byte, off int64) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.blocks) - 1; i >= 0; i-- {
		b := r.blocks[i]
		if off >= b.off && off+int64(len(p)) <= b.off+int64(len(b.data)) {
			// Move to the most recently used end.
			r.blocks = append(append(r.blocks[:i:i], r.blocks[i+1:]...), b)
			return copy(p, b.data[off-b.off:]), true
		}
	}
	return 0, false
}

func (r *readerAt) remember(b block) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.blocks) == readAheadBlocks {
		r.blocks = append(r.blocks[:0:0], r.blocks[1:]...)
	}
	r.blocks = append(r.blocks, b)
}

// fetch fills p from off with one ranged read. The object is shorter than
// size only if it changed under us, which is an error, not an EOF.
func (r *readerAt) fetch(p []byte, off int64) (int, error) {
	rc, err := r.s.NewReader(r.ctx, r.name, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if err != nil {
		return n, fmt.Errorf("read %s bytes %d-%d: %w", r.name, off, off+int64(len(p)), err)
	}
	return n, nil
}

// ReadAll reads the whole object.
func ReadAll(ctx context.Context, s Store, name string) ([]byte, error) {
	rc, err := s.NewReader(ctx, name, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// WriteBytes writes data as the whole content of name.
func WriteBytes(ctx context.Context, s Store, name string, data []byte, opts WriteOptions) (Info, error) {
	return s.Write(ctx, name, bytes.NewReader(data), opts)
}
