package objstore

import (
	"context"
	"io"
)

// Driver is what a backend implements; callers use it through the Bucket
// that NewBucket wraps around it, as the Go CDK's driver.Bucket is used
// through blob.Bucket.
//
// Bucket has done the portable work before a Driver method runs: the store
// is open, names are valid (ValidName; a List prefix by the same rules up to
// its last '/'), offsets are not negative, write options do not contradict
// each other, and the context is not done. And it names the operation and
// the object's URL in any error a method returns. So a Driver neither checks
// nor describes: it returns the cause, a sentinel (ErrNotExist, ErrExists,
// ErrPrecondition) wrapped with what only it knows, or its backend's error.
//
// Otherwise each method has the semantics of the Store method of the same
// name (NewRangeReader those of NewReader). List calls fn in order, one call
// at a time, and returns fn's error unchanged.
type Driver interface {
	NewRangeReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error)
	Stat(ctx context.Context, name string) (Info, error)
	Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error)
	List(ctx context.Context, prefix, startAt string, fn func(Info) error) error
	Delete(ctx context.Context, name string) error
	// URL names the root, as Store.URL does.
	URL() string
	// Close releases the driver's resources; Bucket calls it once.
	Close() error
}
