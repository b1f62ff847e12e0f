package objstore_test

import (
	"errors"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestSubWithAnEmptyPrefixIsTheStoreItself(t *testing.T) {
	t.Parallel()
	s := objstore.NewMemory()
	for _, prefix := range []string{"", "/", "//"} {
		if got := objstore.Sub(s, prefix); got != objstore.Store(s) {
			t.Errorf("Sub(s, %q) is a new view, want s itself", prefix)
		}
	}
}

func TestSubWithAnInvalidPrefixRejectsEveryCall(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	parent := objstore.NewMemory()
	if _, err := objstore.WriteBytes(ctx, parent, "secret", []byte("x"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"..", "a/../..", "a//b", "a\\b"} {
		t.Run(prefix, func(t *testing.T) {
			sub := objstore.Sub(parent, prefix)
			if _, err := sub.Stat(ctx, "secret"); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("Stat: %v, want ErrInvalidName", err)
			}
			if _, err := objstore.WriteBytes(ctx, sub, "x", nil, objstore.WriteOptions{}); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("Write: %v, want ErrInvalidName", err)
			}
			if err := sub.List(ctx, "", "", func(objstore.Info) error { return nil }); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("List: %v, want ErrInvalidName", err)
			}
		})
	}
}
