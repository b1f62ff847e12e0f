package objstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"sync/atomic"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// countingStore counts ranged reads, the round trips a ReaderAt costs.
type countingStore struct {
	objstore.Store
	reads atomic.Int64
}

func (c *countingStore) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	c.reads.Add(1)
	return c.Store.NewReader(ctx, name, offset, length)
}

func TestReaderAtReadsAheadForSmallReads(t *testing.T) {
	t.Parallel()
	data := make([]byte, 1<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	s := &countingStore{Store: objstore.NewMemory()}
	if _, err := objstore.WriteBytes(t.Context(), s, "f", data, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ra := objstore.NewReaderAt(t.Context(), s, "f", int64(len(data)))

	// A parquet reader: the 8-byte tail, the footer, then pages in 4 KiB steps.
	tail := make([]byte, 8)
	if _, err := ra.ReadAt(tail, int64(len(data))-8); err != nil {
		t.Fatal(err)
	}
	footer := make([]byte, 2000)
	if _, err := ra.ReadAt(footer, int64(len(data))-8-2000); err != nil {
		t.Fatal(err)
	}
	if n := s.reads.Load(); n != 1 {
		t.Errorf("tail and footer took %d ranged reads, want 1", n)
	}
	got, err := io.ReadAll(io.NewSectionReader(ra, 0, int64(len(data))))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("sequential read returned wrong bytes")
	}
	// 1 MiB in 256 KiB blocks is 4 reads (+1 for the tail above); a reader
	// without read-ahead would make one per small read.
	if n := s.reads.Load(); n > 6 {
		t.Errorf("reading 1 MiB sequentially took %d ranged reads, want at most 6", n)
	}
}

func TestReaderAtReportsAnObjectShorterThanItsSize(t *testing.T) {
	t.Parallel()
	s := objstore.NewMemory()
	if _, err := objstore.WriteBytes(t.Context(), s, "f", []byte("0123456789"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ra := objstore.NewReaderAt(t.Context(), s, "f", 20)
	n, err := ra.ReadAt(make([]byte, 15), 0)
	if err == nil || err == io.EOF {
		t.Errorf("ReadAt over a shrunken object = %d, %v; want an error other than EOF", n, err)
	}
}

func TestReaderAtOfMissingObjectFails(t *testing.T) {
	t.Parallel()
	ra := objstore.NewReaderAt(t.Context(), objstore.NewMemory(), "missing", 100)
	if _, err := ra.ReadAt(make([]byte, 10), 0); err == nil {
		t.Error("ReadAt of a missing object succeeded")
	}
}
