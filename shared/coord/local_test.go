package coord_test

import (
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/coordtest"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

func newLocal(t *testing.T, store objstore.Store, now func() time.Time) *coord.Local {
	t.Helper()
	c, err := coord.NewLocal(store, coord.LocalOptions{Now: now})
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	return c
}

func localStore(t *testing.T) objstore.Store {
	t.Helper()
	store, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatalf("objstore.NewLocal: %v", err)
	}
	return store
}

func TestLocalConformance(t *testing.T) {
	t.Run("on a local directory", func(t *testing.T) {
		coordtest.Run(t, func(t *testing.T, now func() time.Time) coordtest.Coordinator {
			return newLocal(t, localStore(t), now)
		})
	})
	t.Run("on an in-memory store", func(t *testing.T) {
		coordtest.Run(t, func(t *testing.T, now func() time.Time) coordtest.Coordinator {
			return newLocal(t, objstore.NewMemory(), now)
		})
	})
	t.Run("with two instances on the same directory taking turns", func(t *testing.T) {
		coordtest.Run(t, func(t *testing.T, now func() time.Time) coordtest.Coordinator {
			dir := t.TempDir()
			var cs []coordtest.Coordinator
			for range 2 {
				store, err := objstore.NewLocal(dir)
				if err != nil {
					t.Fatalf("objstore.NewLocal: %v", err)
				}
				cs = append(cs, newLocal(t, store, now))
			}
			return coordtest.Alternate(cs...)
		})
	})
}
