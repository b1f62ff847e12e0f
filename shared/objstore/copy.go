package objstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/dsdelta/dsdelta/shared/opcount"
)

// Copier is a Driver that copies an object to another name of its store
// without the bytes passing through the process: GCS rewrites it within
// the service, the local store links a second name to the file. Drivers
// without it, and copies a Copier does not make (it returns
// errors.ErrUnsupported, having done nothing), are a read and a write.
type Copier interface {
	Copy(ctx context.Context, src, dst string, opts WriteOptions) (Info, error)
}

// Copy copies object src of from to dst of to, with opts applied to the
// write of dst (IfAbsent: ErrExists when dst exists). When from and to are
// views of one store (Sub) whose driver is a Copier, the store copies it;
// otherwise it is read and written through the process.
func Copy(ctx context.Context, from Store, src string, to Store, dst string, opts WriteOptions) (Info, error) {
	if fb, ok := from.(*Bucket); ok {
		if tb, ok := to.(*Bucket); ok {
			if info, done, err := fb.copyTo(ctx, src, tb, dst, opts); done {
				return info, err
			}
		}
	}
	r, err := from.NewReader(ctx, src, 0, -1)
	if err != nil {
		return Info{}, err
	}
	defer r.Close()
	return to.Write(ctx, dst, r, opts)
}

// copyTo is Copy by the driver, when both buckets view the same Copier;
// done is false, with nothing done, when they do not or it does not make
// this copy.
func (b *Bucket) copyTo(ctx context.Context, src string, to *Bucket, dst string, opts WriteOptions) (info Info, done bool, err error) {
	if b.described || to.described || b.invalid != nil || to.invalid != nil {
		return Info{}, false, nil
	}
	fromDrv, fromName := rootName(b.drv, src)
	toDrv, toName := rootName(to.drv, dst)
	c, ok := fromDrv.(Copier)
	if !ok || !sameDriver(fromDrv, toDrv) {
		return Info{}, false, nil
	}
	if err := b.check(ctx, "copy", src); err != nil {
		return Info{}, true, err
	}
	if err := to.check(ctx, "copy", dst); err != nil {
		return Info{}, true, err
	}
	if err := checkOptions(opts); err != nil {
		return Info{}, true, fmt.Errorf("copy %s: %w", to.where(dst), err)
	}
	info, err = c.Copy(ctx, fromName, toName, opts)
	if errors.Is(err, errors.ErrUnsupported) {
		return Info{}, false, nil
	}
	to.count(ctx, opcount.GCSClassA) // a rewrite

	if err != nil {
		return Info{}, true, fmt.Errorf("copy %s to %s: %w", b.where(src), to.where(dst), err)
	}
	info.Name = dst
	return info, true, nil
}

// rootName follows the views of a driver to the driver they view and the
// name there.
func rootName(d Driver, name string) (Driver, string) {
	for {
		p, ok := d.(*prefixed)
		if !ok {
			return d, name
		}
		d, name = p.drv, p.prefix+name
	}
}

// sameDriver reports whether two drivers are the same one (drivers are
// pointers; a driver of a type that cannot be compared is never the same).
func sameDriver(a, b Driver) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta != nil && ta.Comparable() && a == b
}
