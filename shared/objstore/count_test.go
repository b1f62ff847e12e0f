package objstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
)

// TestCallsAreCountedAsCloudStorageBillsThem checks the counts every
// backend adds to the context's counter: the local backends count what the
// call would cost on Cloud Storage.
func TestCallsAreCountedAsCloudStorageBillsThem(t *testing.T) {
	backends := map[string]func(t *testing.T) objstore.Store{
		"memory": func(t *testing.T) objstore.Store { return objstore.NewMemory() },
		"local": func(t *testing.T) objstore.Store {
			s, err := objstore.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			ctx, c := opcount.Start(context.Background())
			step := func(what string, want opcount.Counts, fn func() error) {
				t.Helper()
				before := c.Counts()
				if err := fn(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				got := c.Counts()
				got.GCSClassA -= before.GCSClassA
				got.GCSClassB -= before.GCSClassB
				if got != want {
					t.Errorf("%s counted %+v, want %+v", what, got, want)
				}
			}
			step("a write is one class A operation", opcount.Counts{GCSClassA: 1}, func() error {
				_, err := s.Write(ctx, "a/x", strings.NewReader("x"), objstore.WriteOptions{})
				return err
			})
			step("a failed put-if-absent is billed too", opcount.Counts{GCSClassA: 1}, func() error {
				_, err := s.Write(ctx, "a/x", strings.NewReader("x"), objstore.WriteOptions{IfAbsent: true})
				if err == nil {
					return fmt.Errorf("put-if-absent over an object succeeded")
				}
				return nil
			})
			step("a read and a stat are one class B operation each", opcount.Counts{GCSClassB: 2}, func() error {
				if _, err := objstore.ReadAll(ctx, s, "a/x"); err != nil {
					return err
				}
				_, err := s.Stat(ctx, "a/x")
				return err
			})
			step("a read through a view is counted once", opcount.Counts{GCSClassB: 1}, func() error {
				_, err := objstore.ReadAll(ctx, objstore.Sub(s, "a"), "x")
				return err
			})
			step("a delete is free", opcount.Counts{}, func() error { return s.Delete(ctx, "a/x") })
			if name != "memory" {
				return // paging is the Bucket's, the same for every backend
			}
			for i := range 2001 {
				if _, err := s.Write(context.Background(), fmt.Sprintf("l/%05d", i), strings.NewReader(""), objstore.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			step("a listing is a class A operation per page of 1,000", opcount.Counts{GCSClassA: 3}, func() error {
				return s.List(ctx, "l/", "", func(objstore.Info) error { return nil })
			})
			step("an empty listing is one page", opcount.Counts{GCSClassA: 1}, func() error {
				return s.List(ctx, "none/", "", func(objstore.Info) error { return nil })
			})
		})
	}
}
