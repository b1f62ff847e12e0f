package gcstest

import (
	"errors"
	"net/http"
	"testing"

	"github.com/dsdelta/dsdelta/internal/emuproc"
)

func TestBucketStemMakesValidBucketNames(t *testing.T) {
	tests := []struct{ testName, want string }{
		{"TestGCS/whole_bucket/IfAbsent_creates_once", "testgcs-whole-bucket-ifabsent-creates-on"},
		{"Test", "test"},
		{"___", "test"},
		{"TestA//B", "testa-b"},
	}
	for _, tc := range tests {
		if got := bucketStem(tc.testName); got != tc.want {
			t.Errorf("bucketStem(%q) = %q, want %q", tc.testName, got, tc.want)
		}
	}
}

func TestServerServesBucketsAndStops(t *testing.T) {
	s, err := StartServer(t.Context())
	if errors.Is(err, ErrNotInstalled) {
		emuproc.Require(t, "fake-gcs-server", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client, err := NewClient(t.Context(), s.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	a, b := NewBucket(t, client), NewBucket(t, client)
	if a == b {
		t.Fatalf("two buckets share the name %s", a)
	}
	if _, err := client.Bucket(a).Attrs(t.Context()); err != nil {
		t.Errorf("bucket %s: %v", a, err)
	}
	s.Close()
	if s.proc.Alive() {
		t.Error("server still running after Close")
	}
	// A plain request: the storage client would retry a refused connection.
	if resp, err := http.Get("http://" + s.Host() + "/storage/v1/b"); err == nil {
		resp.Body.Close()
		t.Error("server still answers after Close")
	}
}
