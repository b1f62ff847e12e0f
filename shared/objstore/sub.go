package objstore

import (
	"context"
	"io"
	"strings"
)

// Sub returns a view of s under prefix: name "x" in the view is name
// prefix+"/x" in s, List reports names relative to the prefix and URL appends
// the prefix. Leading and trailing slashes of prefix are ignored; an empty
// prefix returns s itself. A prefix that is not a valid name yields a store
// whose every call fails with ErrInvalidName. The view needs no closing: s
// stays its owner's to close, and a view of a closed store is closed.
// Closing the view closes the view alone.
func Sub(s Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return s
	}
	if b, ok := s.(*Bucket); ok {
		return b.sub(prefix)
	}
	// A Store that is not a Bucket (a test's wrapper around one) checks
	// and describes its own calls; the view checks its names and leaves
	// the rest to it.
	v := NewBucket(storeDriver{s}).sub(prefix)
	v.described = true
	return v
}

// sub is Sub of a Bucket: a Bucket on the same driver with every name
// prefixed, so that a name is checked once, by the view, and an error names
// the object by the view's URL.
func (b *Bucket) sub(prefix string) *Bucket {
	p := newPrefixed(b.drv, prefix, b.url)
	return &Bucket{drv: p, url: p.url, parent: b, invalid: ValidName(prefix), described: b.described}
}

// prefixed is the driver of a view: it maps the view's names to the
// viewed driver's and back.
type prefixed struct {
	drv    Driver
	prefix string // ends with '/'
	url    string
}

// newPrefixed views prefix (no leading or trailing '/') of drv, whose root
// is url.
func newPrefixed(drv Driver, prefix, url string) *prefixed {
	return &prefixed{drv: drv, prefix: prefix + "/", url: joinURL(url, prefix)}
}

func (p *prefixed) NewRangeReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	return p.drv.NewRangeReader(ctx, p.prefix+name, offset, length)
}

func (p *prefixed) Stat(ctx context.Context, name string) (Info, error) {
	info, err := p.drv.Stat(ctx, p.prefix+name)
	info.Name = strings.TrimPrefix(info.Name, p.prefix)
	return info, err
}

func (p *prefixed) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	info, err := p.drv.Write(ctx, p.prefix+name, r, opts)
	info.Name = strings.TrimPrefix(info.Name, p.prefix)
	return info, err
}

func (p *prefixed) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	return p.drv.List(ctx, p.prefix+prefix, p.prefix+startAt, func(info Info) error {
		info.Name = strings.TrimPrefix(info.Name, p.prefix)
		return fn(info)
	})
}

func (p *prefixed) Delete(ctx context.Context, name string) error {
	return p.drv.Delete(ctx, p.prefix+name)
}

func (p *prefixed) URL() string { return p.url }

// Close closes drv; Bucket never calls it for a view, which does not own
// the driver it shares.
func (p *prefixed) Close() error { return p.drv.Close() }

// storeDriver lets a view sit on any Store.
type storeDriver struct{ s Store }

func (d storeDriver) NewRangeReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	return d.s.NewReader(ctx, name, offset, length)
}

func (d storeDriver) Stat(ctx context.Context, name string) (Info, error) {
	return d.s.Stat(ctx, name)
}

func (d storeDriver) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	return d.s.Write(ctx, name, r, opts)
}

func (d storeDriver) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	return d.s.List(ctx, prefix, startAt, fn)
}

func (d storeDriver) Delete(ctx context.Context, name string) error { return d.s.Delete(ctx, name) }

func (d storeDriver) URL() string { return d.s.URL() }

// Close is never called: the view does not own the store.
func (d storeDriver) Close() error { return nil }
