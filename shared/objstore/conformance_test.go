package objstore_test

import (
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/objstore/objstoretest"
)

// The GCS backend runs the same suite in package gcsstore.

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return objstore.NewMemory() })
}

func TestLocalConformance(t *testing.T) {
	t.Parallel()
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A view is a store too: the pipeline writes every table through one.
func TestSubConformance(t *testing.T) {
	t.Parallel()
	t.Run("of a memory store", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store { return objstore.Sub(objstore.NewMemory(), "lake/db") })
	})
	t.Run("of a local store", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			s, err := objstore.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return objstore.Sub(s, "lake/db")
		})
	})
	t.Run("of a store that is not a Bucket", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			return objstore.Sub(wrapped{objstore.NewMemory()}, "lake/db")
		})
	})
	t.Run("opened from a mem URL with a path", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			s, err := objstore.Open(t.Context(), "mem://lake/db")
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

// wrapped is a Store that is not a Bucket, as tests wrap stores to count or
// fail calls.
type wrapped struct{ objstore.Store }
