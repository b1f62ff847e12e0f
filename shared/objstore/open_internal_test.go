package objstore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The default registry is set up by init functions; these tests use a
// registry of their own.

func TestRegistryPassesTheURLAsGivenAndNamesItInErrors(t *testing.T) {
	t.Parallel()
	m := &urlMux{openers: map[string]Opener{}}
	var got string
	m.register("fake", func(_ context.Context, rawURL string) (*Bucket, error) {
		got = rawURL
		if strings.Contains(rawURL, "bad") {
			return nil, errors.New("no such thing")
		}
		return NewMemory(), nil
	})
	const raw = "fake://b/a#b?c%2Fd"
	if _, err := m.open(t.Context(), raw); err != nil {
		t.Fatal(err)
	}
	if got != raw {
		t.Errorf("opener got %q, want %q unparsed", got, raw)
	}
	_, err := m.open(t.Context(), "fake://bad")
	if want := "open store fake://bad: no such thing"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if _, err := m.open(t.Context(), "other://x"); err == nil || !strings.Contains(err.Error(), "registered: fake;") {
		t.Errorf("unknown scheme error %v does not list the registered schemes", err)
	}
}

func TestRegisteringASchemeTwiceOrBadlyPanics(t *testing.T) {
	t.Parallel()
	open := func(context.Context, string) (*Bucket, error) { return NewMemory(), nil }
	for _, tc := range []struct {
		name   string
		scheme string
		open   Opener
	}{
		{"a scheme registered twice", "dup", open},
		{"an empty scheme", "", open},
		{"a scheme with a separator", "a://", open},
		{"no opener", "none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &urlMux{openers: map[string]Opener{}}
			m.register("dup", open)
			defer func() {
				if recover() == nil {
					t.Errorf("register(%q) did not panic", tc.scheme)
				}
			}()
			m.register(tc.scheme, tc.open)
		})
	}
}
