package gcsstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/dsdelta/dsdelta/internal/gcstest"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/objstore/gcsstore"
	"github.com/dsdelta/dsdelta/shared/objstore/objstoretest"
)

// startServer starts fake-gcs-server for the test and returns its host and
// a client of it.
func startServer(t *testing.T) (string, *storage.Client) {
	t.Helper()
	host := gcstest.Start(t)
	client, err := gcstest.NewClient(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return host, client
}

func TestConformance(t *testing.T) {
	t.Parallel()
	_, client := startServer(t)
	t.Run("whole bucket", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			return gcsstore.New(client, gcstest.NewBucket(t, client), "")
		})
	})
	t.Run("bucket prefix", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			return gcsstore.New(client, gcstest.NewBucket(t, client), "lake/root")
		})
	})
}

func TestGCSBehaviour(t *testing.T) {
	t.Parallel()
	_, client := startServer(t)

	t.Run("URL names the bucket and the prefix", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ prefix, want string }{
			{"", "gs://b"},
			{"lake", "gs://b/lake"},
			{"/lake/t1/", "gs://b/lake/t1"},
		} {
			if got := gcsstore.New(client, "b", tc.prefix).URL(); got != tc.want {
				t.Errorf("prefix %q: URL() = %q, want %q", tc.prefix, got, tc.want)
			}
		}
	})

	t.Run("list skips objects whose names are not valid object names", func(t *testing.T) {
		t.Parallel()
		bucket := gcstest.NewBucket(t, client)
		// What the console's "create folder" and other tools leave behind.
		for _, raw := range []string{"dir/", "dir//x", "dir/ok"} {
			w := client.Bucket(bucket).Object(raw).NewWriter(t.Context())
			if _, err := w.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("create %s: %v", raw, err)
			}
		}
		s := gcsstore.New(client, bucket, "")
		if got := objstoretest.ListNames(t, s, ""); !slices.Equal(got, []string{"dir/ok"}) {
			t.Errorf("list = %q, want [dir/ok]", got)
		}
	})

	t.Run("a prefixed store writes below its prefix", func(t *testing.T) {
		t.Parallel()
		bucket := gcstest.NewBucket(t, client)
		s := gcsstore.New(client, bucket, "lake/t1")
		if _, err := objstore.WriteBytes(t.Context(), s, "_delta_log/0.json", []byte("{}"), objstore.WriteOptions{IfAbsent: true, ContentType: "application/json"}); err != nil {
			t.Fatal(err)
		}
		attrs, err := client.Bucket(bucket).Object("lake/t1/_delta_log/0.json").Attrs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if attrs.ContentType != "application/json" {
			t.Errorf("content type %q, want application/json", attrs.ContentType)
		}
		it := client.Bucket(bucket).Objects(t.Context(), &storage.Query{})
		var all []string
		for {
			a, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, a.Name)
		}
		if strings.Join(all, ",") != "lake/t1/_delta_log/0.json" {
			t.Errorf("bucket holds %q, want only lake/t1/_delta_log/0.json", all)
		}
	})

	t.Run("closing a store leaves the caller's client open", func(t *testing.T) {
		t.Parallel()
		bucket := gcstest.NewBucket(t, client)
		if err := gcsstore.New(client, bucket, "").Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := objstore.WriteBytes(t.Context(), gcsstore.New(client, bucket, ""), "o", []byte("x"), objstore.WriteOptions{}); err != nil {
			t.Errorf("write through the client after a store on it was closed: %v", err)
		}
	})

	t.Run("buckets share one store per bucket name", func(t *testing.T) {
		t.Parallel()
		b1, b2 := gcstest.NewBucket(t, client), gcstest.NewBucket(t, client)
		buckets := gcsstore.NewBuckets(client)
		defer buckets.Close()
		s1, err := buckets.Bucket(t.Context(), b1)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := buckets.Bucket(t.Context(), b1); err != nil || again != s1 {
			t.Errorf("second Bucket(%s) = %v, %v; want the same store", b1, again, err)
		}
		s2, err := buckets.Bucket(t.Context(), b2)
		if err != nil {
			t.Fatal(err)
		}
		if s1.URL() != "gs://"+b1 || s2.URL() != "gs://"+b2 {
			t.Errorf("URLs %s, %s; want gs://%s, gs://%s", s1.URL(), s2.URL(), b1, b2)
		}
		if _, err := objstore.WriteBytes(t.Context(), s2, "o", []byte("x"), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := buckets.Bucket(t.Context(), ""); err == nil {
			t.Error("Bucket(\"\") succeeded, want an error")
		}
	})
}

func TestOpenRejectsBadGSURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, url string }{
		{"gs URL without a bucket", "gs:///x"},
		{"gs URL with a climbing prefix", "gs://bucket/../x"},
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
	host, client := startServer(t)
	bucket := gcstest.NewBucket(t, client)
	t.Setenv("STORAGE_EMULATOR_HOST", host)

	s, err := objstore.Open(t.Context(), "gs://"+bucket+"/lake/t1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := "gs://" + bucket + "/lake/t1"; s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
	if _, err := objstore.WriteBytes(t.Context(), s, "f.json", []byte("x"), objstore.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	// Seen from the bucket root through a client that does not use the
	// environment.
	root := gcsstore.New(client, bucket, "")
	if got, err := objstore.ReadAll(t.Context(), root, "lake/t1/f.json"); err != nil || string(got) != "x" {
		t.Errorf("read lake/t1/f.json from the root = %q, %v", got, err)
	}
	// gcsstore.Open is the same store without a URL.
	opened, err := gcsstore.Open(t.Context(), bucket, "lake")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := opened.Stat(t.Context(), "t1/f.json"); err != nil || info.Size != 1 {
		t.Errorf("stat t1/f.json through gcsstore.Open = %+v, %v", info, err)
	}
	if err := opened.Close(); err != nil {
		t.Errorf("close the store and its own client: %v", err)
	}
}
