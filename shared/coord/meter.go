package coord

import (
	"context"
	"io"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
)

// meter is the store of a Local coordinator as the context's
// opcount.Counter sees it: the documents Local keeps as objects stand for
// Firestore's, so a document read, written or deleted is counted as
// Firestore bills it, and the object calls beneath are not counted as
// Cloud Storage's. Local.read counts a document read, found or not, as one
// read (its stats and reads are one get); listings are not counted: Local
// reads the documents it finds by them, which is what a Firestore query
// bills.
type meter struct{ s objstore.Store }

func (m meter) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	return m.s.NewReader(opcount.Without(ctx), name, offset, length)
}

func (m meter) Stat(ctx context.Context, name string) (objstore.Info, error) {
	return m.s.Stat(opcount.Without(ctx), name)
}

func (m meter) Write(ctx context.Context, name string, r io.Reader, opts objstore.WriteOptions) (objstore.Info, error) {
	opcount.Add(ctx, opcount.FirestoreWrite, 1)
	return m.s.Write(opcount.Without(ctx), name, r, opts)
}

func (m meter) List(ctx context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	return m.s.List(opcount.Without(ctx), prefix, startAt, fn)
}

func (m meter) Delete(ctx context.Context, name string) error {
	opcount.Add(ctx, opcount.FirestoreDelete, 1)
	return m.s.Delete(opcount.Without(ctx), name)
}

func (m meter) URL() string { return m.s.URL() }

// Close is never called: Local does not own its store.
func (m meter) Close() error { return nil }
