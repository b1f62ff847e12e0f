package objstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// listCounter counts a store's list calls.
type listCounter struct {
	objstore.Store
	lists int
}

func (c *listCounter) List(ctx context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	c.lists++
	return c.Store.List(ctx, prefix, startAt, fn)
}

func TestEntriesListsAFolderLevelAsADelimiterListingDoes(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	for _, name := range []string{"s/a.x/1", "s/a/1", "s/a/2/3", "s/a0", "s/b/1", "s/b/2", "s/root.jsonl", "s/z/9", "t/other"} {
		if _, err := mem.Write(ctx, name, strings.NewReader("x"), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := &listCounter{Store: mem}
	var got []string
	err := objstore.Entries(ctx, s, "s/", func(name string, folder bool, info objstore.Info) error {
		if folder {
			got = append(got, name+"/")
		} else {
			got = append(got, name)
			if info.Name != name || info.Size != 1 {
				t.Errorf("file %s came with %+v", name, info)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.x/", "a/", "a0", "b/", "root.jsonl", "z/"}
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	if s.lists != 5 { // one per folder (4), and the last one that runs to the end
		t.Errorf("%d list calls, want 5", s.lists)
	}
}
