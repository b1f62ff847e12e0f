package coordtest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// put stores data under key at rev and returns the new revision.
func (e *env) put(key string, data []byte, rev int64) int64 {
	e.t.Helper()
	next, err := e.c.PutWatermark(e.ctx, key, data, rev)
	if err != nil {
		e.t.Fatalf("PutWatermark(%.40q, rev %d): %v", key, rev, err)
	}
	return next
}

// wantWatermark checks the document stored under key.
func (e *env) wantWatermark(key string, data []byte, rev int64) {
	e.t.Helper()
	got, gotRev, err := e.c.Watermark(e.ctx, key)
	if err != nil || gotRev != rev || !bytes.Equal(got, data) {
		e.t.Fatalf("Watermark(%.40q) = %.40q at revision %d, %v; want %.40q at revision %d", key, got, gotRev, err, data, rev)
	}
}

// watermarks lists the keys under prefix and checks each document is
// data(key).
func (e *env) watermarks(prefix string, data func(key string) []byte) []string {
	e.t.Helper()
	var keys []string
	err := e.c.ListWatermarks(e.ctx, prefix, func(key string, got []byte) error {
		if want := data(key); !bytes.Equal(got, want) {
			return fmt.Errorf("document of %q = %q, want %q", key, got, want)
		}
		keys = append(keys, key)
		return nil
	})
	if err != nil {
		e.t.Fatalf("ListWatermarks(%q): %v", prefix, err)
	}
	return keys
}

func testWatermarks(t *testing.T, newCoordinator NewFunc) {
	const key = "gs://source/prefix/shop_customers"
	t.Run("a key never stored reads as nil at revision 0", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		e.wantWatermark(key, nil, 0)
	})
	t.Run("the first put at revision 0 stores revision 1 and each put adds one", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		rev := e.put(key, []byte(`{"after":"2026/03/01/10"}`), 0)
		if rev != 1 {
			t.Fatalf("first revision = %d, want 1", rev)
		}
		e.wantWatermark(key, []byte(`{"after":"2026/03/01/10"}`), 1)
		if rev = e.put(key, []byte(`{"after":"2026/03/01/11"}`), rev); rev != 2 {
			t.Fatalf("second revision = %d, want 2", rev)
		}
		e.wantWatermark(key, []byte(`{"after":"2026/03/01/11"}`), 2)
		e.wantWatermark(key+"/", nil, 0) // another key
	})
	t.Run("a put at a stale revision gets ErrConflict and changes nothing", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		r1 := e.put(key, []byte("one"), 0)
		r2 := e.put(key, []byte("two"), r1)
		for _, rev := range []int64{0, r1, r2 + 1, r2 + 100} {
			_, err := e.c.PutWatermark(e.ctx, key, []byte("stale"), rev)
			wantErr(t, fmt.Sprintf("PutWatermark at revision %d over revision %d", rev, r2), err, coord.ErrConflict)
			e.wantWatermark(key, []byte("two"), r2)
		}
		_, err := e.c.PutWatermark(e.ctx, "gs://source/none", []byte("x"), 1)
		wantErr(t, "PutWatermark at revision 1 of a key never stored", err, coord.ErrConflict)
		e.wantWatermark("gs://source/none", nil, 0)
	})
	t.Run("of writers racing from the same revision exactly one wins", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		const writers = 6
		for round, from := range []int64{0, 1} { // creating the document, then replacing it
			var wg sync.WaitGroup
			start := make(chan struct{})
			revs := make([]int64, writers)
			errs := make([]error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					revs[w], errs[w] = e.c.PutWatermark(e.ctx, key, fmt.Appendf(nil, "round %d writer %d", round, w), from)
				}()
			}
			close(start)
			wg.Wait()
			winner := -1
			for w, err := range errs {
				switch {
				case err == nil && winner < 0:
					winner = w
				case err == nil:
					t.Fatalf("round %d: writers %d and %d both won from revision %d", round, winner, w, from)
				case !errors.Is(err, coord.ErrConflict):
					t.Fatalf("round %d: writer %d: error = %v, want ErrConflict", round, w, err)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no writer won from revision %d", round, from)
			}
			if revs[winner] != from+1 {
				t.Fatalf("round %d: winner got revision %d, want %d", round, revs[winner], from+1)
			}
			e.wantWatermark(key, fmt.Appendf(nil, "round %d writer %d", round, winner), from+1)
		}
	})
	t.Run("list watermarks filters by prefix and orders by key", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		all := []string{
			"gs://b/p/2026/03/01", "gs://b/q/x", "gs://b/p", "gs://b/p/é", "gs://a/p/x",
			"gs://b/p/2025/12/31", "gs://b/p0/x", "gs://b/p/z", "gs://b/p/2026/03/01/00",
		}
		data := func(key string) []byte { return []byte("doc of " + key) }
		for _, k := range all {
			e.put(k, data(k), 0)
		}
		for _, tc := range []struct {
			prefix string
			want   []string
		}{
			// Byte order: '/' < '0' < 'z' < 'é' (0xc3 0xa9).
			{"gs://b/p/", []string{"gs://b/p/2025/12/31", "gs://b/p/2026/03/01", "gs://b/p/2026/03/01/00", "gs://b/p/z", "gs://b/p/é"}},
			{"gs://b/p", []string{"gs://b/p", "gs://b/p/2025/12/31", "gs://b/p/2026/03/01", "gs://b/p/2026/03/01/00", "gs://b/p/z", "gs://b/p/é", "gs://b/p0/x"}},
			{"gs://b/p/2026/03/01", []string{"gs://b/p/2026/03/01", "gs://b/p/2026/03/01/00"}},
			{"gs://c/", nil},
			{"", slices.Sorted(slices.Values(all))},
		} {
			if got := e.watermarks(tc.prefix, data); !slices.Equal(got, tc.want) {
				t.Fatalf("ListWatermarks(%q) = %q\nwant %q", tc.prefix, got, tc.want)
			}
		}
		stop := errors.New("stop")
		calls := 0
		err := e.c.ListWatermarks(e.ctx, "gs://b/", func(string, []byte) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Fatalf("ListWatermarks with fn failing = %v after %d calls, want fn's error after 1", err, calls)
		}
	})
	t.Run("keys as long as the limit are told apart", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		long := "gs://b/" + strings.Repeat("d/", (coord.MaxWatermarkKeyBytes-8)/2)
		a, b := long[:coord.MaxWatermarkKeyBytes-1]+"a", long[:coord.MaxWatermarkKeyBytes-1]+"b"
		e.put(b, []byte("B"), 0)
		e.put(a, []byte("A"), 0)
		e.wantWatermark(a, []byte("A"), 1)
		e.wantWatermark(b, []byte("B"), 1)
		got := e.watermarks("gs://b/", func(k string) []byte { return []byte{k[len(k)-1] - 'a' + 'A'} })
		if !slices.Equal(got, []string{a, b}) {
			t.Fatalf("ListWatermarks = %d keys ending %q, want the two long keys in order", len(got), lastBytes(got))
		}
	})
	t.Run("a document up to the size limit is stored and a larger one is refused", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		most := bytes.Repeat([]byte{0xa5}, coord.MaxWatermarkBytes)
		rev := e.put(key, most, 0)
		e.wantWatermark(key, most, rev)
		tooLarge := slices.Concat(most, []byte{1})
		_, err := e.c.PutWatermark(e.ctx, key, tooLarge, rev)
		if err == nil || errors.Is(err, coord.ErrConflict) {
			t.Fatalf("PutWatermark of %d bytes = %v, want a size error", len(tooLarge), err)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(coord.MaxWatermarkBytes)) {
			t.Fatalf("size error %q does not name the limit %d", err, coord.MaxWatermarkBytes)
		}
		e.wantWatermark(key, most, rev)
		_, err = e.c.PutWatermark(e.ctx, key+"/new", tooLarge, 0)
		if err == nil {
			t.Fatalf("PutWatermark of %d bytes under a new key succeeded", len(tooLarge))
		}
		e.wantWatermark(key+"/new", nil, 0)
	})
	t.Run("watermarks never expire", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		rev := e.put(key, []byte("progress"), 0)
		e.clock.Advance(400 * 24 * time.Hour)
		if _, err := e.c.Expire(e.ctx, e.clock.Now()); err != nil {
			t.Fatalf("Expire: %v", err)
		}
		e.wantWatermark(key, []byte("progress"), rev)
	})
}

// lastBytes returns the last byte of each key, for messages about long keys.
func lastBytes(keys []string) string {
	var b []byte
	for _, k := range keys {
		b = append(b, k[len(k)-1])
	}
	return string(b)
}
