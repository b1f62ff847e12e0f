package parquetfile

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/value"
)

// TestTreeRebuildsTheSchemaWithItsLevelsAndFindsChildren: the tree of a
// footer's schema numbers the leaves in order, carries each node's
// definition and repetition levels, and finds a child by field id, by
// name, or by name ignoring case.
func TestTreeRebuildsTheSchemaWithItsLevelsAndFindsChildren(t *testing.T) {
	fields := []value.Field{
		{Name: "Id", Type: value.Long},
		{Name: "s", Type: value.StructType{Fields: []value.Field{{Name: "x", Type: value.Integer, Nullable: true}}}, Nullable: true},
		{Name: "l", Type: value.ArrayType{Element: value.String, ContainsNull: true}, Nullable: true},
	}
	ids := map[string]int{"Id": 7, "s": 8, "x": 9, "l": 10}
	s, err := NewSchema(fields, func(f value.Field) (string, int) { return f.Name, ids[f.Name] })
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := parquet.NewWriter(&buf, s.Parquet).Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	root, leaves, err := Tree(f.Metadata().Schema)
	if err != nil || leaves != 3 {
		t.Fatalf("%d leaves, %v", leaves, err)
	}
	id := root.Child("other", 7)
	if id == nil || id.Name != "Id" || !id.IsLeaf() || id.Leaf != 0 || id.Def != 0 {
		t.Fatalf("by id: %+v", id)
	}
	if c := root.Child("id", 0); c != id {
		t.Fatalf("by name ignoring case: %+v", c)
	}
	x := root.Child("s", 0).Child("x", 0)
	if x == nil || x.Leaf != 1 || x.Def != 2 || x.Rep != 0 {
		t.Fatalf("s.x: %+v", x)
	}
	elem := root.Child("l", 0).Children[0].Children[0] // l.list.element
	if !elem.IsLeaf() || elem.Leaf != 2 || elem.Def != 3 || elem.Rep != 1 {
		t.Fatalf("l.list.element: %+v", elem)
	}
	if root.Child("none", 0) != nil {
		t.Fatal("a child of no such name")
	}
	if _, _, err := Tree(nil); err == nil {
		t.Fatal("a footer without a schema")
	}
}
