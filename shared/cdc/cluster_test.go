package cdc

import (
	"context"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

func TestClusterColumnsAreTheKeyOfACurrentStateTableOnly(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{{Name: "region", Type: value.String}, {Name: "id", Type: value.Long}}}
	for _, tc := range []struct {
		name string
		conf map[string]string
		want []string
	}{
		{"a current-state table clusters by its key, in key order", map[string]string{PropRole: "state", PropKey: "id,region"}, []string{"id", "region"}},
		{"a key column no longer in the schema is left out", map[string]string{PropRole: "state", PropKey: "gone,id"}, []string{"id"}},
		{"a history table is not clustered", map[string]string{PropRole: "history", PropKey: "id"}, nil},
		{"a table without a key is not clustered", map[string]string{PropRole: "state"}, nil},
		{"an scd2 table clusters by its key, then each version's valid-from", map[string]string{PropRole: "state", PropKey: "id", PropMode: "scd2"}, []string{"id", ColValidFrom}},
		{"a soft_delete table clusters by its key", map[string]string{PropRole: "state", PropKey: "id", PropMode: "soft_delete"}, []string{"id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := delta.Create(ctx, objstore.NewMemory(), delta.CreateOptions{Schema: schema, Configuration: tc.conf})
			if err != nil {
				t.Fatal(err)
			}
			if got := ClusterColumns(snap); !slices.Equal(got, tc.want) {
				t.Fatalf("ClusterColumns = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCompactionOptionsKeepTheClosedVersionsOfAnSCD2TableApart(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	for _, tc := range []struct {
		name string
		mode string
		want string
	}{
		{"an scd2 table separates the versions whose valid-to is null", "scd2", ColValidTo},
		{"a current table keeps its rows together", "current", ""},
		{"a soft_delete table keeps its rows together", "soft_delete", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := delta.Create(ctx, objstore.NewMemory(), delta.CreateOptions{Schema: schema, Configuration: map[string]string{PropRole: "state", PropKey: "id", PropMode: tc.mode}})
			if err != nil {
				t.Fatal(err)
			}
			if got := CompactionOptions(snap).SeparateNulls; got != tc.want {
				t.Fatalf("SeparateNulls = %q, want %q", got, tc.want)
			}
		})
	}
}
