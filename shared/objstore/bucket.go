package objstore

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/dsdelta/dsdelta/shared/opcount"
)

// Bucket is the portable Store over a Driver. It checks what every backend
// must reject (a closed store, an invalid name or List prefix, a negative
// offset, contradictory write options, a done context) before the driver
// sees the call, and names the operation and the object's URL in every
// error the driver returns, so each rule and each message lives here once.
// It is safe for concurrent use when its driver is.
type Bucket struct {
	drv    Driver
	url    string
	closed atomic.Bool
	// parent is the bucket a Sub view views: the view is closed when it
	// is, and leaves the driver to it.
	parent *Bucket
	// invalid, set by Sub for a prefix that is not a valid name, fails
	// every call.
	invalid error
	// described marks a driver whose errors already name the operation and
	// the object (a view of a Store that is not a Bucket, which describes
	// its own errors), so that they are not named twice.
	described bool
}

// NewBucket returns the Store that uses d. Drivers call it from their
// constructors; the Bucket owns d and closes it on Close.
func NewBucket(d Driver) *Bucket {
	return &Bucket{drv: d, url: d.URL()}
}

// URL implements Store.
func (b *Bucket) URL() string { return b.url }

// NewReader implements Store.
func (b *Bucket) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := b.check(ctx, "read", name); err != nil {
		return nil, err
	}
	if offset < 0 {
		// GCS would read it as "the last -offset bytes", which the other
		// backends cannot express.
		return nil, fmt.Errorf("read %s: negative offset %d", b.where(name), offset)
	}
	b.count(ctx, opcount.GCSClassB)
	r, err := b.drv.NewRangeReader(ctx, name, offset, length)
	if err != nil {
		return nil, b.fail("read", name, err)
	}
	return r, nil
}

// Stat implements Store.
func (b *Bucket) Stat(ctx context.Context, name string) (Info, error) {
	if err := b.check(ctx, "stat", name); err != nil {
		return Info{}, err
	}
	b.count(ctx, opcount.GCSClassB)
	info, err := b.drv.Stat(ctx, name)
	if err != nil {
		return Info{}, b.fail("stat", name, err)
	}
	return info, nil
}

// Write implements Store.
func (b *Bucket) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	if err := b.check(ctx, "write", name); err != nil {
		return Info{}, err
	}
	if err := checkOptions(opts); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", b.where(name), err)
	}
	b.count(ctx, opcount.GCSClassA)
	info, err := b.drv.Write(ctx, name, r, opts)
	switch {
	case err == nil:
		return info, nil
	case opts.IfGenerationMatch > 0 && !b.described:
		return Info{}, fmt.Errorf("write %s (if generation %d): %w", b.where(name), opts.IfGenerationMatch, err)
	default:
		return Info{}, b.fail("write", name, err)
	}
}

// List implements Store. An error of fn is returned as it is.
func (b *Bucket) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	if err := b.usable("list"); err != nil {
		return err
	}
	if err := validPrefix(prefix); err != nil {
		return fmt.Errorf("list %s: %w", b.url, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list %s: %w", b.where(prefix), err)
	}
	var stopped error
	listed := 0
	b.count(ctx, opcount.GCSClassA)
	err := b.drv.List(ctx, prefix, startAt, func(info Info) error {
		if listed++; listed%listPage == 1 && listed > 1 {
			b.count(ctx, opcount.GCSClassA) // the next page's request
		}
		if err := fn(info); err != nil {
			stopped = err
			return err
		}
		return nil
	})
	if stopped != nil {
		return stopped
	}
	if err != nil {
		return b.fail("list", prefix, err)
	}
	return nil
}

// listPage is how many objects one page of a Cloud Storage listing
// returns, each page a class A operation.
const listPage = 1000

// Delete implements Store. Deletes are free on Cloud Storage and are not
// counted.
func (b *Bucket) Delete(ctx context.Context, name string) error {
	if err := b.check(ctx, "delete", name); err != nil {
		return err
	}
	if err := b.drv.Delete(ctx, name); err != nil {
		return b.fail("delete", name, err)
	}
	return nil
}

// Close implements Store: it closes the driver, and every later call fails
// with ErrClosed, a second Close included. Closing a view made by Sub
// closes the view alone; the store it views owns the driver.
func (b *Bucket) Close() error {
	if b.closed.Swap(true) {
		return fmt.Errorf("close %s: %w", b.url, ErrClosed)
	}
	if b.parent != nil {
		return nil
	}
	if err := b.drv.Close(); err != nil {
		return fmt.Errorf("close %s: %w", b.url, err)
	}
	return nil
}

// usable fails a call on a closed store, a view of a closed store, or a
// view of an invalid prefix.
func (b *Bucket) usable(op string) error {
	for x := b; x != nil; x = x.parent {
		if x.closed.Load() {
			return fmt.Errorf("%s %s: %w", op, b.url, ErrClosed)
		}
	}
	if b.invalid != nil {
		return fmt.Errorf("%s %s: %w", op, b.url, b.invalid)
	}
	return nil
}

// check is the portable part of a call on one object. An invalid name is
// reported after the store's URL, not joined to it: it may not be a path.
func (b *Bucket) check(ctx context.Context, op, name string) error {
	if err := b.usable(op); err != nil {
		return err
	}
	if err := ValidName(name); err != nil {
		return fmt.Errorf("%s %s: %w", op, b.url, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, b.where(name), err)
	}
	return nil
}

// count adds a call to the counter ctx carries, as Cloud Storage would bill
// it whatever the backend (see package opcount). A view over a Store that
// is not a Bucket leaves the counting to that store.
func (b *Bucket) count(ctx context.Context, k opcount.Kind) {
	if !b.described {
		opcount.Add(ctx, k, 1)
	}
}

// fail names the operation and the object in a driver's error.
func (b *Bucket) fail(op, name string, err error) error {
	if b.described {
		return err
	}
	return fmt.Errorf("%s %s: %w", op, b.where(name), err)
}

// where is the URL of an object of the store, for messages.
func (b *Bucket) where(name string) string { return joinURL(b.url, name) }

// joinURL appends a '/'-separated path to a store URL.
func joinURL(u, name string) string {
	if name == "" {
		return u
	}
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u + name
}
