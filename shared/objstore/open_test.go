package objstore_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestOpenLocalAndMemoryURLs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rel, err := filepath.Rel(mustGetwd(t), filepath.Join(dir, "rel"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		url     string
		wantURL string
	}{
		{"a file URL opens a local directory", "file://" + filepath.ToSlash(dir) + "/lake", filepath.Join(dir, "lake")},
		{"a file URL with localhost opens a local directory", "file://localhost" + filepath.ToSlash(dir) + "/lh", filepath.Join(dir, "lh")},
		{"an absolute path opens a local directory", filepath.Join(dir, "abs"), filepath.Join(dir, "abs")},
		{"a relative path opens a local directory", rel, filepath.Join(dir, "rel")},
		{"mem:// opens a memory store", "mem://", "mem://"},
		{"mem:// with a path opens a view of a memory store", "mem://x/y", "mem://x/y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := objstore.Open(t.Context(), tc.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.url, err)
			}
			if s.URL() != tc.wantURL {
				t.Errorf("URL() = %q, want %q", s.URL(), tc.wantURL)
			}
			if _, err := objstore.WriteBytes(t.Context(), s, "o", []byte("data"), objstore.WriteOptions{}); err != nil {
				t.Fatalf("write: %v", err)
			}
			if got, err := objstore.ReadAll(t.Context(), s, "o"); err != nil || string(got) != "data" {
				t.Errorf("read back %q, %v", got, err)
			}
		})
	}
}

func TestOpenGivesEachMemoryURLAFreshStore(t *testing.T) {
	t.Parallel()
	a, err := objstore.Open(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.WriteBytes(t.Context(), a, "o", nil, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := objstore.Open(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(t.Context(), "o"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("second mem:// store sees the first one's object: %v", err)
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, url string }{
		{"empty URL", ""},
		{"unknown scheme", "s3://bucket/x"},
		{"file URL of a remote host", "file://server/share"},
		{"file URL without a path", "file://"},
		{"mem URL with a climbing prefix", "mem://../x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := objstore.Open(t.Context(), tc.url); err == nil {
				t.Errorf("Open(%q) = %s, want an error", tc.url, s.URL())
			}
		})
	}
}

func TestOpenWithoutTheDriverOfASchemeSaysSo(t *testing.T) {
	t.Parallel()
	// This test binary does not import gcsstore, so gs:// is not registered.
	_, err := objstore.Open(t.Context(), "gs://bucket/lake")
	if err == nil {
		t.Fatal("Open(gs://...) succeeded without the gcsstore driver")
	}
	for _, want := range []string{`unsupported scheme "gs"`, "registered: file, mem", "when its package is imported"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestOpenedStoresCloseAndViewsCloseAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, url := range []string{"mem://", "mem://x/y", filepath.Join(t.TempDir(), "lake")} {
		t.Run(url, func(t *testing.T) {
			s, err := objstore.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			view := objstore.Sub(s, "v")
			if err := view.Close(); err != nil {
				t.Fatalf("close a view: %v", err)
			}
			if _, err := view.Stat(ctx, "o"); !errors.Is(err, objstore.ErrClosed) {
				t.Errorf("Stat through the closed view: %v, want ErrClosed", err)
			}
			if _, err := objstore.WriteBytes(ctx, s, "v/o", []byte("x"), objstore.WriteOptions{}); err != nil {
				t.Errorf("write to the store after closing a view of it: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if _, err := s.Stat(ctx, "v/o"); !errors.Is(err, objstore.ErrClosed) {
				t.Errorf("Stat after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func TestSplitSeparatesStoreURLAndName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, wantDir, wantName string
	}{
		{"gs object under a prefix", "gs://b/x/y/f.avro", "gs://b/x/y", "f.avro"},
		{"gs object at the bucket root", "gs://b/f.avro", "gs://b", "f.avro"},
		{"gs bucket alone has no name", "gs://b", "gs://b", ""},
		{"file URL", "file:///data/lake/f.json", "file:///data/lake", "f.json"},
		{"file URL at the filesystem root", "file:///f.json", "file:///", "f.json"},
		{"absolute path", "/data/lake/f.json", "/data/lake", "f.json"},
		{"relative path", "lake/f.json", "lake", "f.json"},
		{"bare file name", "f.json", ".", "f.json"},
		{"mem URL", "mem://a/f", "mem://a", "f"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, name := objstore.Split(tc.url)
			if dir != tc.wantDir || name != tc.wantName {
				t.Errorf("Split(%q) = (%q, %q), want (%q, %q)", tc.url, dir, name, tc.wantDir, tc.wantName)
			}
		})
	}
}

func TestSplitThenOpenReadsTheObject(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newLocal(t, dir)
	if _, err := objstore.WriteBytes(t.Context(), s, "src/t/f.jsonl", []byte("line\n"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{filepath.Join(dir, "src", "t", "f.jsonl"), "file://" + filepath.ToSlash(dir) + "/src/t/f.jsonl"} {
		storeURL, name := objstore.Split(url)
		store, err := objstore.Open(t.Context(), storeURL)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := objstore.ReadAll(t.Context(), store, name); err != nil || string(got) != "line\n" {
			t.Errorf("%s: read %q, %v", url, got, err)
		}
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
