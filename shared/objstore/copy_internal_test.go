package objstore

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// copyingMemory is the memory driver with a Copier that counts its calls.
type copyingMemory struct {
	*memory
	copies []string
}

func (c *copyingMemory) Copy(ctx context.Context, src, dst string, opts WriteOptions) (Info, error) {
	c.copies = append(c.copies, src+" -> "+dst)
	rc, err := c.memory.NewRangeReader(ctx, src, 0, -1)
	if err != nil {
		return Info{}, err
	}
	defer rc.Close()
	return c.memory.Write(ctx, dst, rc, opts)
}

// TestCopyLetsTheStoreCopyBetweenViewsOfItself: views of one bucket whose
// driver copies are copied by the driver, named as the driver knows them;
// anything else is read and written.
func TestCopyLetsTheStoreCopyBetweenViewsOfItself(t *testing.T) {
	ctx := context.Background()
	drv := &copyingMemory{memory: newMemory()}
	root := NewBucket(drv)
	from, to := Sub(Sub(root, "lake"), "_staging/t"), Sub(root, "lake/db/t_log")
	if _, err := WriteBytes(ctx, from, "p.parquet", []byte("bytes"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := Copy(ctx, from, "p.parquet", to, "d=1/q.parquet", WriteOptions{IfAbsent: true})
	if err != nil || info.Name != "d=1/q.parquet" || info.Size != 5 {
		t.Fatalf("copy: %+v, %v", info, err)
	}
	if want := "lake/_staging/t/p.parquet -> lake/db/t_log/d=1/q.parquet"; len(drv.copies) != 1 || drv.copies[0] != want {
		t.Fatalf("driver copies %q, want [%s]", drv.copies, want)
	}
	if _, err := Copy(ctx, from, "p.parquet", to, "d=1/q.parquet", WriteOptions{IfAbsent: true}); !errors.Is(err, ErrExists) {
		t.Fatalf("second copy: %v, want ErrExists", err)
	}
	// Another bucket over another driver: read and written.
	other := NewBucket(&copyingMemory{memory: newMemory()})
	if _, err := Copy(ctx, from, "p.parquet", other, "q.parquet", WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(drv.copies) != 2 {
		t.Fatalf("driver copies %q: the copy to another bucket went to the driver", drv.copies)
	}
	got, err := ReadAll(ctx, other, "q.parquet")
	if err != nil || !bytes.Equal(got, []byte("bytes")) {
		t.Fatalf("the copy to another bucket reads %q, %v", got, err)
	}
	// A closed view copies nothing.
	closed := Sub(root, "lake")
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Copy(ctx, closed, "_staging/t/p.parquet", to, "d=1/r.parquet", WriteOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("copy from a closed view: %v, want ErrClosed", err)
	}
}

// refusingMemory is the memory driver with a Copier that makes no copy.
type refusingMemory struct {
	*memory
	asked int
}

func (r *refusingMemory) Copy(context.Context, string, string, WriteOptions) (Info, error) {
	r.asked++
	return Info{}, errors.ErrUnsupported
}

// TestACopyTheDriverDoesNotMakeIsReadAndWritten: a Copier that does not
// make a copy (errors.ErrUnsupported) leaves it to a read and a write,
// which honour the write's options.
func TestACopyTheDriverDoesNotMakeIsReadAndWritten(t *testing.T) {
	ctx := context.Background()
	drv := &refusingMemory{memory: newMemory()}
	root := NewBucket(drv)
	from, to := Sub(root, "_staging/t"), Sub(root, "db/t_log")
	if _, err := WriteBytes(ctx, from, "p.parquet", []byte("bytes"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := Copy(ctx, from, "p.parquet", to, "d=1/q.parquet", WriteOptions{IfAbsent: true})
	if err != nil || info.Name != "d=1/q.parquet" || info.Size != 5 || drv.asked != 1 {
		t.Fatalf("copy: %+v, %v (driver asked %d times, want 1)", info, err, drv.asked)
	}
	if got, err := ReadAll(ctx, to, "d=1/q.parquet"); err != nil || string(got) != "bytes" {
		t.Fatalf("the copy reads %q, %v", got, err)
	}
	if _, err := Copy(ctx, from, "p.parquet", to, "d=1/q.parquet", WriteOptions{IfAbsent: true}); !errors.Is(err, ErrExists) {
		t.Fatalf("second copy: %v, want ErrExists", err)
	}
}
