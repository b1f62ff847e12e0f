package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeStream writes a SQL Server stream's file of dbo.orders inserts
// (id:item) under the stream's root folder prefix of src, in Datastream's
// layout.
func writeStream(t *testing.T, src, prefix, database string, items ...string) {
	t.Helper()
	var b strings.Builder
	for i, idItem := range items {
		id, item, _ := strings.Cut(idItem, ":")
		fmt.Fprintf(&b, `{"uuid":"u-%s-%d","read_timestamp":"2026-01-05T10:00:00.000Z","source_timestamp":"2026-01-05T10:00:%02d.000Z","object":"dbo_orders","read_method":"sqlserver-cdc",`+
			`"source_metadata":{"schema":"dbo","table":"orders","database":"%s","lsn":"00000025:%08X:0003","tx_id":"0x1","primary_keys":["id"],"change_type":"INSERT","is_deleted":false},"payload":{"id":%s,"item":%q}}`+"\n",
			database, i, i, database, 16+i, id, item)
	}
	name := filepath.Join(src, prefix, "dbo_orders", "2026", "01", "05", "10", "00", database+"_sqlserver-cdc_1_0_0.jsonl")
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// showItems returns the items of a table's rows, by dsdelta show, sorted.
func showItems(t *testing.T, table string) []string {
	t.Helper()
	out, errOut, code := cli(t, "show", table, "--format", "jsonl")
	if code != 0 {
		t.Fatalf("show %s: %d %s %s", table, code, out, errOut)
	}
	var items []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		_, rest, _ := strings.Cut(line, `"item":"`)
		item, _, _ := strings.Cut(rest, `"`)
		items = append(items, item)
	}
	slices.Sort(items)
	return items
}

// TestRunOverTwoStreamFolders: two SQL Server databases streamed into two
// folders of one source both have dbo.orders. Without a mapping the second
// stream's file is quarantined, naming both folders, and the first keeps
// its table; with one, each has its table under its namespace.
func TestRunOverTwoStreamFolders(t *testing.T) {
	setup := func(t *testing.T) (dir, src, lake string) {
		dir = t.TempDir()
		src, lake = filepath.Join(dir, "src"), filepath.Join(dir, "lake")
		writeStream(t, src, "hr-db", "hr", "2:hr-2", "3:hr-3")
		writeStream(t, src, "sales-db", "sales", "1:sales-1", "2:sales-2")
		return dir, src, lake
	}

	t.Run("without a mapping the second stream's file is quarantined and exits 3", func(t *testing.T) {
		_, src, lake := setup(t)
		// One file at a time, in name order: hr-db's file stages first.
		out, errOut, code := cli(t, "run", "--source", src, "--lake", lake, "--parallel", "1")
		if code != 3 {
			t.Fatalf("run = %d, want 3\n%s\n%s", code, out, errOut)
		}
		row := summaryRow(t, out, "dbo.orders")
		if row["merged files"] != "1" || row["quarantined"] != "1" || row["inserted"] != "2" {
			t.Fatalf("dbo.orders = %v, want one file merged and one quarantined", row)
		}
		var reason string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "quarantined: sales-db/") {
				reason = line
			}
		}
		if !strings.Contains(reason, `"hr-db/"`) || !strings.Contains(reason, `"sales-db/"`) || !strings.Contains(reason, "dbo.orders") {
			t.Fatalf("no quarantine line naming the table and both folders:\n%s", out)
		}
		if got := showItems(t, filepath.Join(lake, "dbo", "orders")); strings.Join(got, ",") != "hr-2,hr-3" {
			t.Fatalf("dbo.orders holds %v, want hr-db's rows only", got)
		}
		// The merged file's staged objects are gone after maintenance;
		// the quarantined one never had any.
		err := filepath.WalkDir(filepath.Join(lake, "_staging"), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("left in the staging area: %s", path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("with a mapping each stream has its own table and the run exits 0", func(t *testing.T) {
		dir, src, lake := setup(t)
		cfg := filepath.Join(dir, "dsdelta.yaml")
		if err := os.WriteFile(cfg, []byte("sources:\n  - {prefix: sales-db/, namespace: sales}\n  - {prefix: hr-db/, namespace: hr}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := cli(t, "run", "--source", src, "--lake", lake, "--config", cfg)
		if code != 0 {
			t.Fatalf("run = %d, want 0\n%s\n%s", code, out, errOut)
		}
		for _, id := range []string{"sales.dbo.orders", "hr.dbo.orders"} {
			if row := summaryRow(t, out, id); row["merged files"] != "1" || row["inserted"] != "2" {
				t.Fatalf("%s = %v, want its file merged", id, row)
			}
		}
		if strings.Contains(out, "\ndbo.orders ") {
			t.Fatalf("a table without a namespace in the summary:\n%s", out)
		}
		if got := showItems(t, filepath.Join(lake, "sales", "dbo", "orders")); strings.Join(got, ",") != "sales-1,sales-2" {
			t.Fatalf("sales.dbo.orders holds %v", got)
		}
		if got := showItems(t, filepath.Join(lake, "hr", "dbo", "orders")); strings.Join(got, ",") != "hr-2,hr-3" {
			t.Fatalf("hr.dbo.orders holds %v", got)
		}
	})
}
