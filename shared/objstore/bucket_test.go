package objstore_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// recorder is a Driver that records the calls reaching it and fails each
// with err (nil: succeeds with empty results).
type recorder struct {
	mu     sync.Mutex
	calls  []string
	err    error
	closed int
}

func (r *recorder) record(call string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
	return r.err
}

func (r *recorder) NewRangeReader(_ context.Context, name string, _, _ int64) (io.ReadCloser, error) {
	if err := r.record("read " + name); err != nil {
		return nil, err
	}
	return io.NopCloser(strings.NewReader("")), nil
}

func (r *recorder) Stat(_ context.Context, name string) (objstore.Info, error) {
	return objstore.Info{Name: name}, r.record("stat " + name)
}

func (r *recorder) Write(_ context.Context, name string, _ io.Reader, _ objstore.WriteOptions) (objstore.Info, error) {
	return objstore.Info{Name: name}, r.record("write " + name)
}

func (r *recorder) List(_ context.Context, prefix, _ string, fn func(objstore.Info) error) error {
	if err := r.record("list " + prefix); err != nil {
		return err
	}
	for _, name := range []string{prefix + "1", prefix + "2"} {
		if err := fn(objstore.Info{Name: name}); err != nil {
			// Wrapped, to check that the Bucket still returns fn's own
			// error.
			return errors.Join(errors.New("driver detail"), err)
		}
	}
	return nil
}

func (r *recorder) Delete(_ context.Context, name string) error { return r.record("delete " + name) }

func (r *recorder) URL() string { return "rec://root" }

func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed++
	return nil
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func TestBucketRejectsBadCallsBeforeTheDriver(t *testing.T) {
	t.Parallel()
	done, cancel := context.WithCancel(t.Context())
	cancel()
	nop := func(objstore.Info) error { return nil }
	tests := []struct {
		name string
		call func(s objstore.Store) error
		want error
	}{
		{"an invalid name to read", func(s objstore.Store) error { _, err := s.NewReader(t.Context(), "../x", 0, -1); return err }, objstore.ErrInvalidName},
		{"an invalid name to stat", func(s objstore.Store) error { _, err := s.Stat(t.Context(), "a//b"); return err }, objstore.ErrInvalidName},
		{"an invalid name to write", func(s objstore.Store) error {
			_, err := objstore.WriteBytes(t.Context(), s, "/abs", nil, objstore.WriteOptions{})
			return err
		}, objstore.ErrInvalidName},
		{"an invalid name to delete", func(s objstore.Store) error { return s.Delete(t.Context(), "") }, objstore.ErrInvalidName},
		{"a list prefix that climbs out", func(s objstore.Store) error { return s.List(t.Context(), "../", "", nop) }, objstore.ErrInvalidName},
		{"a negative offset", func(s objstore.Store) error { _, err := s.NewReader(t.Context(), "x", -1, 5); return err }, nil},
		{"IfAbsent with IfGenerationMatch", func(s objstore.Store) error {
			_, err := objstore.WriteBytes(t.Context(), s, "x", nil, objstore.WriteOptions{IfAbsent: true, IfGenerationMatch: 3})
			return err
		}, nil},
		{"a negative IfGenerationMatch", func(s objstore.Store) error {
			_, err := objstore.WriteBytes(t.Context(), s, "x", nil, objstore.WriteOptions{IfGenerationMatch: -1})
			return err
		}, nil},
		{"a read with a done context", func(s objstore.Store) error { _, err := s.NewReader(done, "x", 0, -1); return err }, context.Canceled},
		{"a write with a done context", func(s objstore.Store) error {
			_, err := objstore.WriteBytes(done, s, "x", nil, objstore.WriteOptions{})
			return err
		}, context.Canceled},
		{"a list with a done context", func(s objstore.Store) error { return s.List(done, "", "", nop) }, context.Canceled},
		{"a delete with a done context", func(s objstore.Store) error { return s.Delete(done, "x") }, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, view := range []bool{false, true} {
				drv := &recorder{}
				var s objstore.Store = objstore.NewBucket(drv)
				if view {
					s = objstore.Sub(s, "v")
				}
				err := tc.call(s)
				if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Errorf("view %v: err = %v, want %v", view, err, tc.want)
				}
				if !strings.Contains(err.Error(), s.URL()) {
					t.Errorf("view %v: error %q does not name the store %s", view, err, s.URL())
				}
				if calls := drv.seen(); len(calls) != 0 {
					t.Errorf("view %v: the driver saw %q", view, calls)
				}
			}
		})
	}
}

func TestBucketNamesTheOperationAndTheObjectOnceInDriverErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	boom := errors.New("boom")
	tests := []struct {
		name string
		call func(s objstore.Store) error
		want string // after the store's URL
	}{
		{"read", func(s objstore.Store) error { _, err := s.NewReader(ctx, "a/b", 0, -1); return err }, "read %s/a/b: boom"},
		{"stat", func(s objstore.Store) error { _, err := s.Stat(ctx, "a/b"); return err }, "stat %s/a/b: boom"},
		{"write", func(s objstore.Store) error {
			_, err := objstore.WriteBytes(ctx, s, "a/b", nil, objstore.WriteOptions{})
			return err
		}, "write %s/a/b: boom"},
		{"conditional write", func(s objstore.Store) error {
			_, err := objstore.WriteBytes(ctx, s, "a/b", nil, objstore.WriteOptions{IfGenerationMatch: 7})
			return err
		}, "write %s/a/b (if generation 7): boom"},
		{"list", func(s objstore.Store) error { return s.List(ctx, "a/", "", func(objstore.Info) error { return nil }) }, "list %s/a/: boom"},
		{"delete", func(s objstore.Store) error { return s.Delete(ctx, "a/b") }, "delete %s/a/b: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range []objstore.Store{
				objstore.NewBucket(&recorder{err: boom}),
				objstore.Sub(objstore.NewBucket(&recorder{err: boom}), "lake/t"),
			} {
				err := tc.call(s)
				if !errors.Is(err, boom) {
					t.Fatalf("%s: err = %v, want boom", s.URL(), err)
				}
				if want := strings.Replace(tc.want, "%s", s.URL(), 1); err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			}
		})
	}
	t.Run("a view of a Store that is not a Bucket leaves the naming to it", func(t *testing.T) {
		s := objstore.Sub(wrapped{objstore.NewBucket(&recorder{err: boom})}, "lake/t")
		_, err := s.Stat(ctx, "a/b")
		if want := "stat rec://root/lake/t/a/b: boom"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	})
}

func TestBucketListReturnsTheCallbacksErrorItself(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop")
	for _, s := range []objstore.Store{objstore.NewBucket(&recorder{}), objstore.Sub(objstore.NewBucket(&recorder{}), "v")} {
		var seen int
		err := s.List(t.Context(), "", "", func(objstore.Info) error {
			seen++
			return stop
		})
		if err != stop || seen != 1 {
			t.Errorf("%s: List = %v after %d calls, want stop itself after 1", s.URL(), err, seen)
		}
	}
}

func TestBucketClosesItsDriverOnceAndViewsNever(t *testing.T) {
	t.Parallel()
	drv := &recorder{}
	b := objstore.NewBucket(drv)
	view := objstore.Sub(b, "v")
	if err := view.Close(); err != nil {
		t.Fatal(err)
	}
	if drv.closed != 0 {
		t.Fatalf("closing a view closed the driver")
	}
	if _, err := b.Stat(t.Context(), "x"); err != nil {
		t.Errorf("Stat after closing a view: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); !errors.Is(err, objstore.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if drv.closed != 1 {
		t.Errorf("driver closed %d times, want 1", drv.closed)
	}
	if calls := drv.seen(); len(calls) != 1 {
		t.Errorf("driver saw %q, want only the Stat before Close", calls)
	}
}
