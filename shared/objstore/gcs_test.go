package objstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/dsdelta/dsdelta/internal/gcstest"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestGCSBehaviour(t *testing.T) {
	t.Parallel()
	host := gcstest.Start(t)
	client, err := gcstest.NewClient(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })

	t.Run("URL names the bucket and the prefix", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ prefix, want string }{
			{"", "gs://b"},
			{"lake", "gs://b/lake"},
			{"/lake/t1/", "gs://b/lake/t1"},
		} {
			if got := objstore.NewGCS(t.Context(), client, "b", tc.prefix).URL(); got != tc.want {
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
		s := objstore.NewGCS(t.Context(), client, bucket, "")
		if got := listNames(t, s, ""); !slices.Equal(got, []string{"dir/ok"}) {
			t.Errorf("list = %q, want [dir/ok]", got)
		}
	})

	t.Run("a prefixed store writes below its prefix", func(t *testing.T) {
		t.Parallel()
		bucket := gcstest.NewBucket(t, client)
		s := objstore.NewGCS(t.Context(), client, bucket, "lake/t1")
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
}
