package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := realMain(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestRunShowVerifyReplay drives the embedded job the way the README does:
// simulate, run, run again (idempotent), show, verify, then replay a file
// that was quarantined until the configuration was fixed.
func TestRunShowVerifyReplay(t *testing.T) {
	dir := t.TempDir()
	src, lake := filepath.Join(dir, "src"), filepath.Join(dir, "lake")
	if out, errOut, code := cli(t, "simulate", "--out", src, "--rows", "8", "--changes", "40", "--seed", "5"); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	// A JSON file whose column "amount" holds text where the table will
	// hold numbers: quarantined until the column is ignored.
	bad := filepath.Join(src, "shop_customers", "2026", "01", "05", "23", "59", "zz_mysql-cdc-binlog_1_0_0.jsonl")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	line := `{"uuid":"x","read_timestamp":"2026-01-05T23:59:00Z","source_timestamp":"2026-01-05T23:59:00Z","object":"shop_customers","read_method":"mysql-cdc-binlog","source_metadata":{"table":"customers","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.999999999","log_position":4,"change_type":"INSERT","is_deleted":false},"payload":{"id":100000,"balance":"not a number"}}` + "\n"
	if err := os.WriteFile(bad, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, "run", "--source", src, "--lake", lake)
	if code != 0 {
		t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"shop.customers", "HR.EMPLOYEES", "public.order_lines", "quarantined: shop_customers/2026/01/05/23/59/zz_mysql-cdc-binlog_1_0_0.jsonl", "balance"} {
		if !strings.Contains(out, want) {
			t.Fatalf("run output lacks %q:\n%s", want, out)
		}
	}
	out2, _, code := cli(t, "run", "--source", src, "--lake", lake)
	if code != 0 || strings.Contains(out2, "shop.customers      4") {
		t.Fatalf("second run was not idempotent: %s", out2)
	}
	show, _, code := cli(t, "show", filepath.Join(lake, "shop", "customers"), "--format", "jsonl", "--limit", "3")
	if code != 0 || strings.Count(show, "\n") != 3 || !strings.Contains(show, `"_ds_position"`) {
		t.Fatalf("show: %d %s", code, show)
	}
	for _, tab := range []string{"shop/customers", "HR/EMPLOYEES", "public/order_lines"} {
		if out, errOut, code := cli(t, "verify", filepath.Join(lake, tab)); code != 0 {
			t.Fatalf("verify %s: %s %s", tab, out, errOut)
		}
	}
	// Fix: ignore the column, then replay the quarantined file.
	cfg := filepath.Join(dir, "dsdelta.yaml")
	if err := os.WriteFile(cfg, []byte("tables:\n  shop.customers:\n    ignore_columns: [balance]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli(t, "replay", "--source", src, "--lake", lake, "--config", cfg)
	if code != 0 || !strings.Contains(out, "1 files staged and merged, 0 still quarantined") {
		t.Fatalf("replay: %d %s %s", code, out, errOut)
	}
	show, _, _ = cli(t, "show", filepath.Join(lake, "shop", "customers"), "--format", "jsonl")
	if !strings.Contains(show, `"id":100000`) {
		t.Fatal("the replayed row is not in the table")
	}
	if out, _, code := cli(t, "describe", filepath.Join(lake, "nope")); code == 0 {
		t.Fatalf("describe of a missing table succeeded: %s", out)
	}
}
