package objstore_test

import (
	"testing"

	"github.com/dsdelta/dsdelta/internal/gcstest"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/objstore/objstoretest"
)

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

func TestGCSConformance(t *testing.T) {
	t.Parallel()
	host := gcstest.Start(t)
	client, err := gcstest.NewClient(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	t.Run("whole bucket", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			return objstore.NewGCS(t.Context(), client, gcstest.NewBucket(t, client), "")
		})
	})
	t.Run("bucket prefix", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			return objstore.NewGCS(t.Context(), client, gcstest.NewBucket(t, client), "lake/root")
		})
	})
}
