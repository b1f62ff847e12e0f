package datastream

import (
	"errors"
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

func TestParseTableIDTakesTwoOrThreeParts(t *testing.T) {
	tests := []struct {
		name, in string
		want     TableID
		wantErr  string
	}{
		{"a database and a table are an id", "shop.orders", TableID{Database: "shop", Table: "orders"}, ""},
		{"a namespace, a database and a table are an id", "sales.dbo.orders", TableID{Namespace: "sales", Database: "dbo", Table: "orders"}, ""},
		{"one part is refused", "orders", TableID{}, "is not <database>.<table>"},
		{"four parts are refused", "a.b.c.d", TableID{}, "is not <database>.<table>"},
		{"an empty part is refused", "a..c", TableID{}, "empty"},
		{"a slash is refused", "a/b.c", TableID{}, "database or schema name"},
		{"dots alone are refused", "..", TableID{}, "empty"},
		{"a namespace starting with an underscore is refused", "_staging.dbo.orders", TableID{}, "starts with '_'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := ParseTableID(tt.in)
			if tt.wantErr == "" {
				if err != nil || id != tt.want || id.String() != tt.in {
					t.Fatalf("ParseTableID(%q) = %#v, %v", tt.in, id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseTableID(%q) err = %v, want one mentioning %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestTableIDsTakeTheNamespaceAndTheSQLServerDatabase(t *testing.T) {
	line := func(database string) string {
		return `{"uuid":"s","read_timestamp":"2024-05-09T06:56:54Z","source_timestamp":"2024-05-09T06:56:54Z","object":"dbo_orders","read_method":"sqlserver-cdc",` +
			`"source_metadata":{"schema":"dbo","table":"orders",` + database + `"lsn":"00000025:00000728:0003","tx_id":"0x1","primary_keys":["id"],"change_type":"INSERT","is_deleted":false},"payload":{"id":1}}` + "\n"
	}
	mysql := `{"uuid":"m","read_timestamp":"2024-05-09T06:56:54Z","source_timestamp":"2024-05-09T06:56:54Z","object":"shop_orders","read_method":"mysql-cdc-binlog","source_metadata":{"table":"orders","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.000001","log_position":4,"change_type":"INSERT","is_deleted":false},"payload":{"id":1}}` + "\n"
	tests := []struct {
		name    string
		data    string
		opts    Options
		want    string
		wantErr string
	}{
		{"a SQL Server table is named by its schema by default", line(`"database":"sales",`), Options{}, "dbo.orders", ""},
		{"a SQL Server table is named by its database and schema when asked", line(`"database":"sales",`), Options{SQLServerDatabase: true}, "sales_dbo.orders", ""},
		{"the database changes the id", line(`"database":"hr",`), Options{SQLServerDatabase: true}, "hr_dbo.orders", ""},
		{"a namespace prefixes the id", line(`"database":"sales",`), Options{Namespace: "east", SQLServerDatabase: true}, "east.sales_dbo.orders", ""},
		{"a MySQL table is named by its database either way", mysql, Options{SQLServerDatabase: true}, "shop.orders", ""},
		{"a namespace prefixes a MySQL id", mysql, Options{Namespace: "east"}, "east.shop.orders", ""},
		{"a SQL Server event without a database is bad when the id needs it", line(""), Options{SQLServerDatabase: true}, "", "source_metadata.database"},
		{"a database name that is no id part is bad", line(`"database":"my db",`), Options{SQLServerDatabase: true}, "", "source_metadata.database"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := decodeAll(t, []byte(tt.data), "f.jsonl", tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrBadRecord) {
					t.Fatalf("err = %v, want a bad record naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(evs) != 1 || evs[0].Table.String() != tt.want {
				t.Fatalf("decoded %v, %v; want one event of %s", evs, err, tt.want)
			}
			if _, err := ParseTableID(tt.want); err != nil {
				t.Fatalf("the id %s does not parse: %v", tt.want, err)
			}
		})
	}
	t.Run("an invalid namespace is refused before decoding", func(t *testing.T) {
		if _, err := decodeAll(t, []byte(mysql), "f.jsonl", Options{Namespace: "a/b"}); err == nil || !strings.Contains(err.Error(), "namespace") {
			t.Fatalf("err = %v, want the namespace refused", err)
		}
	})
}
