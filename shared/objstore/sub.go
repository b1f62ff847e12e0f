package objstore

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Sub returns a view of s under prefix: name "x" in the view is name
// prefix+"/x" in s, List reports names relative to the prefix and URL appends
// the prefix. Leading and trailing slashes of prefix are ignored; an empty
// prefix returns s itself. A prefix that is not a valid name yields a store
// whose every call fails with ErrInvalidName.
func Sub(s Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return s
	}
	return &subStore{s: s, prefix: prefix + "/", err: ValidName(prefix)}
}

type subStore struct {
	s      Store
	prefix string // ends with '/'
	err    error  // invalid prefix
}

func (v *subStore) check(op, name string) error {
	if v.err != nil {
		return fmt.Errorf("%s %s in %s: %w", op, name, v.URL(), v.err)
	}
	if err := ValidName(name); err != nil {
		return fmt.Errorf("%s %s in %s: %w", op, name, v.URL(), err)
	}
	return nil
}

func (v *subStore) URL() string {
	u := v.s.URL()
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u + strings.TrimSuffix(v.prefix, "/")
}

func (v *subStore) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := v.check("read", name); err != nil {
		return nil, err
	}
	return v.s.NewReader(ctx, v.prefix+name, offset, length)
}

func (v *subStore) Stat(ctx context.Context, name string) (Info, error) {
	if err := v.check("stat", name); err != nil {
		return Info{}, err
	}
	info, err := v.s.Stat(ctx, v.prefix+name)
	info.Name = strings.TrimPrefix(info.Name, v.prefix)
	return info, err
}

func (v *subStore) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	if err := v.check("write", name); err != nil {
		return Info{}, err
	}
	info, err := v.s.Write(ctx, v.prefix+name, r, opts)
	info.Name = strings.TrimPrefix(info.Name, v.prefix)
	return info, err
}

func (v *subStore) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	if v.err != nil {
		return fmt.Errorf("list %s in %s: %w", prefix, v.URL(), v.err)
	}
	if err := validPrefix(prefix); err != nil {
		return fmt.Errorf("list %s in %s: %w", prefix, v.URL(), err)
	}
	return v.s.List(ctx, v.prefix+prefix, v.prefix+startAt, func(info Info) error {
		info.Name = strings.TrimPrefix(info.Name, v.prefix)
		return fn(info)
	})
}

func (v *subStore) Delete(ctx context.Context, name string) error {
	if err := v.check("delete", name); err != nil {
		return err
	}
	return v.s.Delete(ctx, v.prefix+name)
}
