package datastream

import (
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func TestNewTableIDValidatesEachPart(t *testing.T) {
	tests := []struct {
		name      string
		db, table string
		wantErr   string
	}{
		{"letters, digits, underscore, dollar and hyphen are accepted", "ea-main", "all_types$2", ""},
		{"a dot in the table name is refused", "demo", "inventory.voters", "table name"},
		{"a slash in the database name is refused", "a/b", "t", "database or schema name"},
		{"an empty table name is refused", "db", "", "table name"},
		{"a space is refused", "db", "my table", "table name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := NewTableID(tt.db, tt.table)
			if tt.wantErr == "" {
				if err != nil || id.String() != tt.db+"."+tt.table {
					t.Fatalf("NewTableID = %v, %v", id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestDiffSchemaReportsAddedDroppedAndRetypedColumns(t *testing.T) {
	old := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long}, {Name: "name", Type: value.String}, {Name: "age", Type: value.Integer},
	}}
	new := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long}, {Name: "age", Type: value.Long}, {Name: "email", Type: value.String},
	}}
	d := DiffSchema(old, new)
	if len(d.Added) != 1 || d.Added[0].Name != "email" {
		t.Errorf("Added = %v, want email", d.Added)
	}
	if len(d.Dropped) != 1 || d.Dropped[0].Name != "name" {
		t.Errorf("Dropped = %v, want name", d.Dropped)
	}
	if len(d.Retyped) != 1 || d.Retyped[0].Name != "age" || d.Retyped[0].Old != value.Integer || d.Retyped[0].New != value.Long {
		t.Errorf("Retyped = %v, want age integer→long", d.Retyped)
	}
	if got := d.String(); got != "added email string; dropped name; retyped age integer→long" {
		t.Errorf("String = %q", got)
	}
	if !DiffSchema(old, old).Empty() {
		t.Error("a schema differs from itself")
	}
}

func TestSchemaCacheReportsChangesPerObject(t *testing.T) {
	s1 := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	s2 := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}, {Name: "x", Type: value.String}}}
	var c SchemaCache
	if d, isNew := c.Observe("l1_Users", "k1", s1); !isNew || !d.Empty() {
		t.Fatalf("first schema: diff %v new %v", d, isNew)
	}
	if d, isNew := c.Observe("l1_Users", "k1", s1); isNew || !d.Empty() {
		t.Fatalf("same key again: diff %v new %v", d, isNew)
	}
	d, isNew := c.Observe("l1_Users", "k2", s2)
	if !isNew || len(d.Added) != 1 || d.Added[0].Name != "x" {
		t.Fatalf("new key: diff %v new %v, want x added", d, isNew)
	}
	// The same schema_key on another object is another schema.
	if d, isNew := c.Observe("l1_Books", "k1", s2); !isNew || !d.Empty() {
		t.Fatalf("other object: diff %v new %v", d, isNew)
	}
	if got, ok := c.Lookup("l1_Users", "k1"); !ok || !value.Equal(got, s1) {
		t.Errorf("Lookup = %v %v", got, ok)
	}
}
