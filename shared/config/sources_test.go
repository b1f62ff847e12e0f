package config

import (
	"strings"
	"testing"
)

func TestSources(t *testing.T) {
	t.Run("a prefix maps its files to a namespace, and other files keep none", func(t *testing.T) {
		c, err := Parse([]byte(`
sqlserver_table_id: database
sources:
  - prefix: sales-db/
    namespace: sales
  - prefix: /datastream/hr/
    namespace: hr
    sqlserver_table_id: schema
  - prefix: eu
    bucket: b2
    namespace: eu
`))
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			bucket, name string
			want         Source
		}{
			{"", "sales-db/dbo_orders/2026/01/05/10/00/f.jsonl", Source{Prefix: "sales-db/", Namespace: "sales", SQLServerTableID: SQLServerDatabase}},
			{"b1", "datastream/hr/dbo_orders/2026/01/05/10/00/f.jsonl", Source{Prefix: "/datastream/hr/", Namespace: "hr", SQLServerTableID: SQLServerSchema}},
			{"b2", "eu/x/f.jsonl", Source{Prefix: "eu", Bucket: "b2", Namespace: "eu", SQLServerTableID: SQLServerDatabase}},
			{"b1", "eu/x/f.jsonl", Source{SQLServerTableID: SQLServerDatabase}},
			{"", "sales-dbx/f.jsonl", Source{SQLServerTableID: SQLServerDatabase}},
			{"", "other/f.jsonl", Source{SQLServerTableID: SQLServerDatabase}},
		} {
			if got := c.SourceOf(tt.bucket, tt.name); got != tt.want {
				t.Errorf("SourceOf(%q, %q) = %+v, want %+v", tt.bucket, tt.name, got, tt.want)
			}
		}
		if !c.HasNamespace("hr") || c.HasNamespace("dbo") {
			t.Error("HasNamespace")
		}
	})
	t.Run("SQL Server tables are named by schema unless configured", func(t *testing.T) {
		if got := (Config{}).SourceOf("", "x/f.jsonl"); got != (Source{SQLServerTableID: SQLServerSchema}) {
			t.Errorf("SourceOf = %+v", got)
		}
	})
	t.Run("a namespaced table id is a tables key", func(t *testing.T) {
		c, err := Parse([]byte("sources: [{prefix: a/, namespace: sales}]\ntables:\n  sales.dbo.orders:\n    primary_key: [id]\n"))
		if err != nil || len(c.Table("sales.dbo.orders").PrimaryKey) != 1 {
			t.Fatal(c, err)
		}
	})
	for _, bad := range []struct{ name, doc, want string }{
		{"a namespace with a slash", "sources: [{prefix: a/, namespace: x/y}]", `sources[0].namespace: "x/y" has '/'`},
		{"a namespace with a dot", "sources: [{prefix: a/, namespace: x.y}]", `sources[0].namespace: "x.y" has '.'`},
		{"a namespace of the lake's own folders", "sources: [{prefix: a/, namespace: _staging}]", `sources[0].namespace: "_staging" starts with '_'`},
		{"a prefix with a dot-dot folder", "sources: [{prefix: a/../b, namespace: x}]", `sources[0].prefix: "a/../b" has an empty`},
		{"a prefix with an empty folder", "sources: [{prefix: a//b, namespace: x}]", `sources[0].prefix: "a//b" has an empty`},
		{"a bucket that is a path", "sources: [{prefix: a, bucket: b/c, namespace: x}]", `sources[0].bucket: "b/c" is not a bucket name`},
		{"an entry that sets nothing", "sources: [{prefix: a}]", `sources[0] (prefix "a") sets neither namespace nor sqlserver_table_id`},
		{"an unknown SQL Server naming", "sqlserver_table_id: catalog", `sqlserver_table_id: "catalog" is not schema or database`},
		{"an unknown SQL Server naming of a source", "sources: [{prefix: a, sqlserver_table_id: db}]", `sources[0].sqlserver_table_id: "db" is not schema or database`},
		{"a duplicate prefix", "sources: [{prefix: a/, namespace: x}, {prefix: /a, namespace: y}]", `sources[1].prefix "/a" is also sources[0].prefix`},
		{"a prefix inside another", "sources: [{prefix: a/, namespace: x}, {prefix: a/b/, namespace: y}]", `sources[1].prefix "a/b/" is inside sources[0].prefix "a/"`},
		{"a prefix holding another", "sources: [{prefix: a/b, namespace: x}, {prefix: a, namespace: y}]", `sources[1].prefix "a" holds sources[0].prefix "a/b"`},
		{"the whole bucket beside a prefix", "sources: [{prefix: a, namespace: x}, {prefix: '', namespace: y}]", `sources[1].prefix "" holds sources[0].prefix "a"`},
		{"a prefix of any bucket inside one of a named bucket", "sources: [{prefix: a, bucket: b, namespace: x}, {prefix: a/c, namespace: y}]", `sources[1].prefix "a/c" is inside sources[0].prefix "a"`},
		{"an unknown key of an entry", "sources: [{prefix: a, namespase: x}]", "namespase"},
		{"a tables key of four parts", "tables:\n  a.b.c.d: {}\n", `tables: "a.b.c.d" is not a table id`},
	} {
		t.Run("rejects "+bad.name, func(t *testing.T) {
			_, err := Parse([]byte(bad.doc))
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("err = %v, want mention of %q", err, bad.want)
			}
		})
	}
	t.Run("the same prefix in two named buckets is two streams", func(t *testing.T) {
		c, err := Parse([]byte("sources: [{prefix: ds, bucket: b1, namespace: x}, {prefix: ds, bucket: b2, namespace: y}]"))
		if err != nil || c.SourceOf("b2", "ds/f").Namespace != "y" || c.SourceOf("b1", "ds/f").Namespace != "x" {
			t.Fatal(c, err)
		}
	})
	t.Run("two streams may share a namespace", func(t *testing.T) {
		if _, err := Parse([]byte("sources: [{prefix: a, namespace: x}, {prefix: b, namespace: x}]")); err != nil {
			t.Fatal(err)
		}
	})
}
