package objstore_test

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/dsdelta/dsdelta/internal/gcstest"
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
		{"gs URL without a bucket", "gs:///x"},
		{"gs URL with a climbing prefix", "gs://bucket/../x"},
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

// Open reads STORAGE_EMULATOR_HOST, so this test sets it and cannot run in
// parallel with the others.
func TestOpenGSURLUsesTheEmulatorFromTheEnvironment(t *testing.T) {
	host := gcstest.Start(t)
	client, err := gcstest.NewClient(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	bucket := gcstest.NewBucket(t, client)
	t.Setenv("STORAGE_EMULATOR_HOST", host)

	s, err := objstore.Open(t.Context(), "gs://"+bucket+"/lake/t1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.(io.Closer).Close()
	if want := "gs://" + bucket + "/lake/t1"; s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
	if _, err := objstore.WriteBytes(t.Context(), s, "f.json", []byte("x"), objstore.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	// Seen from the bucket root through a client that does not use the
	// environment.
	root := objstore.NewGCS(t.Context(), client, bucket, "")
	if got, err := objstore.ReadAll(t.Context(), root, "lake/t1/f.json"); err != nil || string(got) != "x" {
		t.Errorf("read lake/t1/f.json from the root = %q, %v", got, err)
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
