package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
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
	if out, errOut, code := cli(t, "simulate", "--fixed-dates", "--out", src, "--rows", "8", "--changes", "40", "--seed", "5"); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	// A JSON file whose column "amount" holds text where the table will
	// hold numbers: quarantined until the column is ignored.
	line := `{"uuid":"x","read_timestamp":"2026-01-05T23:59:00Z","source_timestamp":"2026-01-05T23:59:00Z","object":"shop_customers","read_method":"mysql-cdc-binlog","source_metadata":{"table":"customers","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.999999999","log_position":4,"change_type":"INSERT","is_deleted":false},"payload":{"id":100000,"balance":"not a number"}}` + "\n"
	writeSource(t, src, "shop_customers/2026/01/05/23/59/zz_mysql-cdc-binlog_1_0_0.jsonl", line)
	out, errOut, code := cli(t, "run", "--source", src, "--lake", lake)
	if code != 3 {
		t.Fatalf("run with a quarantined file = %d, want 3\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"shop.customers", "HR.EMPLOYEES", "public.order_lines", "quarantined: shop_customers/2026/01/05/23/59/zz_mysql-cdc-binlog_1_0_0.jsonl", "balance"} {
		if !strings.Contains(out, want) {
			t.Fatalf("run output lacks %q:\n%s", want, out)
		}
	}
	out2, _, code := cli(t, "run", "--source", src, "--lake", lake)
	if row := summaryRow(t, out2, "shop.customers"); code != 3 || row["staged files"] != "0" || row["merged files"] != "0" || row["quarantined"] != "1" {
		t.Fatalf("second run was not idempotent (%d, want 3 for the file still quarantined): %s", code, out2)
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
	if code != 0 || !strings.Contains(out, "1 files staged, 1 merged, 0 still quarantined") {
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

// simulated writes a small Datastream output and returns it with a lake
// folder beside it.
func simulated(t *testing.T) (src, lake string) {
	t.Helper()
	dir := t.TempDir()
	src, lake = filepath.Join(dir, "src"), filepath.Join(dir, "lake")
	if out, errOut, code := cli(t, "simulate", "--fixed-dates", "--out", src, "--rows", "4", "--changes", "12", "--seed", "3"); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	return src, lake
}

// writeSource writes a file into a source folder, as Datastream would,
// and returns its name.
func writeSource(t *testing.T, src, name, data string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// summaryRow returns a table's row of run's summary by column name. Cells
// are separated by two spaces or more; names have single spaces.
func summaryRow(t *testing.T, out, tableID string) map[string]string {
	t.Helper()
	split := regexp.MustCompile(`\s{2,}`)
	var header []string
	for _, line := range strings.Split(out, "\n") {
		cells := split.Split(strings.TrimSpace(line), -1)
		if cells[0] == "table" {
			header = cells
		} else if header != nil && cells[0] == tableID {
			row := map[string]string{}
			for i, name := range header {
				if i < len(cells) {
					row[name] = cells[i]
				}
			}
			return row
		}
	}
	t.Fatalf("no row of %s in the summary:\n%s", tableID, out)
	return nil
}

// holdLease takes a table's lease in the lake for another holder, as a
// process given by proc would (a zero proc is this process).
func holdLease(t *testing.T, lake, tableID string, proc coord.Process) (*coord.Local, coord.Lease) {
	t.Helper()
	store, err := objstore.NewLocal(lake)
	if err != nil {
		t.Fatal(err)
	}
	c, err := coord.NewLocal(store, coord.LocalOptions{Process: proc})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(context.Background(), tableID, "other-run/1", time.Hour)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return c, l
}

func TestRunExitCodes(t *testing.T) {
	t.Run("a run that merges everything exits 0 and says what each column counts", func(t *testing.T) {
		src, lake := simulated(t)
		out, errOut, code := cli(t, "run", "--source", src, "--lake", lake)
		if code != 0 {
			t.Fatalf("run = %d, want 0\n%s\n%s", code, out, errOut)
		}
		row := summaryRow(t, out, "shop.customers")
		if row["staged files"] == "0" || row["staged files"] != row["merged files"] || row["pending"] != "0" || row["quarantined"] != "0" {
			t.Fatalf("row = %v, want every staged file merged and none left", row)
		}
		for _, want := range []string{"this run staged", "this run changed", "not merged"} {
			if !strings.Contains(out, want) {
				t.Fatalf("the summary does not explain its columns (%q):\n%s", want, out)
			}
		}
	})
	t.Run("usage and configuration errors exit 2", func(t *testing.T) {
		src, lake := simulated(t)
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(bad, []byte("batch_max_files: -1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"run", "--lake", lake},
			{"run", "--source", src, "--lake", lake, "--no-such-flag"},
			{"run", "--source", src, "--lake", lake, "--config", bad},
			{"run", "--source", src, "--lake", lake, "--config", filepath.Join(src, "missing.yaml")},
			{"run", "--source", filepath.Join(src, "missing"), "--lake", lake},
		} {
			if out, errOut, code := cli(t, args...); code != 2 {
				t.Errorf("%v = %d, want 2\n%s\n%s", args, code, out, errOut)
			}
		}
	})
	t.Run("a failure exits 1", func(t *testing.T) {
		src, lake := simulated(t)
		doc := filepath.Join(lake, "_dsdelta", "coord", "tables", "shop.customers.json")
		if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(doc, []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake); code != 1 {
			t.Fatalf("run on a broken lake = %d, want 1\n%s\n%s", code, out, errOut)
		}
	})
	t.Run("a quarantined file exits 3 and is named, also on the next run", func(t *testing.T) {
		src, lake := simulated(t)
		name := writeSource(t, src, "shop_customers/2026/01/05/23/59/zz_mysql-cdc-binlog_1_0_0.jsonl", "{not json\n")
		for range 2 {
			out, errOut, code := cli(t, "run", "--source", src, "--lake", lake)
			if code != 3 || !strings.Contains(out, "quarantined: "+name) {
				t.Fatalf("run = %d, want 3 naming %s\n%s\n%s", code, name, out, errOut)
			}
			// No table can be read from it: it is one row, under the one label.
			if row := summaryRow(t, out, pipeline.UnknownTable); row["quarantined"] != "1" {
				t.Fatalf("row of %s = %v, want the file quarantined\n%s", pipeline.UnknownTable, row, out)
			}
			if n := strings.Count(out, "unknown"); n != strings.Count(pipeline.UnknownTable, "unknown") {
				t.Fatalf("the summary names an unknown table in more than one row:\n%s", out)
			}
		}
	})
}

// TestRunWaitsForALiveHolder holds a table's lease as a live process would
// and checks that run says so and waits until it is released, or, with
// --no-wait, leaves the files pending, names them and exits 3; the run
// after it merges them and says so.
func TestRunWaitsForALiveHolder(t *testing.T) {
	host, _ := os.Hostname()
	held := regexp.MustCompile(`shop\.customers: lease held by ` + regexp.QuoteMeta(host) + `/\d+ until \d\d:\d\d:\d\d; `)
	t.Run("without --no-wait it waits for the release and merges", func(t *testing.T) {
		src, lake := simulated(t)
		c, l := holdLease(t, lake, "shop.customers", coord.Process{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// stderr goes to a file, which the test reads while the run writes.
		errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		defer errFile.Close()
		errOut := func() string {
			b, _ := os.ReadFile(errFile.Name())
			return string(b)
		}
		var out bytes.Buffer
		done := make(chan int)
		go func() { done <- realMain(ctx, []string{"run", "--source", src, "--lake", lake}, &out, errFile) }()
		for !held.MatchString(errOut()) {
			select {
			case code := <-done:
				t.Fatalf("run ended (%d) without waiting for the lease\n%s\n%s", code, out.String(), errOut())
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !strings.Contains(errOut(), "; waiting") {
			t.Fatalf("run does not say it waits:\n%s", errOut())
		}
		if err := c.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		if code := <-done; code != 0 {
			t.Fatalf("run after the release = %d, want 0\n%s\n%s", code, out.String(), errOut())
		}
		if row := summaryRow(t, out.String(), "shop.customers"); row["pending"] != "0" || row["merged files"] == "0" {
			t.Fatalf("row = %v, want everything merged", row)
		}
	})
	t.Run("with --no-wait it leaves the files pending, names them and exits 3", func(t *testing.T) {
		src, lake := simulated(t)
		c, l := holdLease(t, lake, "shop.customers", coord.Process{})
		out, errOut, code := cli(t, "run", "--source", src, "--lake", lake, "--no-wait")
		if code != 3 || !held.MatchString(errOut) || !strings.Contains(out, "pending: shop_customers/") {
			t.Fatalf("run --no-wait = %d, want 3, the holder and the pending files named\n%s\n%s", code, out, errOut)
		}
		row := summaryRow(t, out, "shop.customers")
		if row["staged files"] == "0" || row["merged files"] != "0" || row["pending"] != row["staged files"] {
			t.Fatalf("row = %v, want the staged files pending", row)
		}
		staged := row["staged files"]
		if err := c.Release(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		out, errOut, code = cli(t, "run", "--source", src, "--lake", lake, "--no-wait")
		if code != 0 {
			t.Fatalf("run after the release = %d, want 0\n%s\n%s", code, out, errOut)
		}
		if row := summaryRow(t, out, "shop.customers"); row["staged files"] != "0" || row["merged files"] != staged || row["pending"] != "0" {
			t.Fatalf("row = %v, want nothing staged and the %s files of the earlier run merged", row, staged)
		}
	})
}

// TestRunTakesOverTheLeaseOfAKilledRun leaves a table's lease held for an
// hour by a process that no longer exists on this host, as a SIGKILLed run
// does, and checks that the next run merges at once.
func TestRunTakesOverTheLeaseOfAKilledRun(t *testing.T) {
	src, lake := simulated(t)
	gone := coord.CurrentProcess()
	gone.PID = 1 << 30 // no process has it
	holdLease(t, lake, "shop.customers", gone)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := realMain(ctx, []string{"run", "--source", src, "--lake", lake}, &out, &errOut); code != 0 {
		t.Fatalf("run = %d, want 0\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "took over the lease") {
		t.Fatalf("run does not report the takeover:\n%s", errOut.String())
	}
	if row := summaryRow(t, out.String(), "shop.customers"); row["pending"] != "0" || row["merged files"] == "0" {
		t.Fatalf("row = %v, want everything merged", row)
	}
}

// TestRunWatchPicksUpFilesAsTheyArrive runs `run --watch` over a folder,
// adds a file while it runs, and stops it as a signal would: the summary
// counts every file staged and merged, and the late file's change is in
// the table.
func TestRunWatchPicksUpFilesAsTheyArrive(t *testing.T) {
	src, lake := simulated(t)
	store, err := objstore.NewLocal(lake)
	if err != nil {
		t.Fatal(err)
	}
	c, err := coord.NewLocal(store, coord.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	done := make(chan int)
	go func() {
		done <- realMain(ctx, []string{"run", "--source", src, "--lake", lake, "--watch", "--interval", "20ms"}, &out, &errOut)
	}()
	// merged waits until at least want files of shop.customers are merged,
	// every file the registry knows of it, and its batch closed (a batch
	// marks its files merged before it closes).
	merged := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			files, err := c.ListFiles(context.Background(), "shop.customers", "")
			n := 0
			for _, f := range files {
				if f.State == coord.StateMerged {
					n++
				}
			}
			st, serr := c.Status(context.Background(), "shop.customers")
			if err == nil && serr == nil && n >= want && len(files) == n && st.OpenBatchSeq == 0 {
				return
			}
			select {
			case code := <-done:
				t.Fatalf("run --watch ended (%d) by itself\n%s\n%s", code, out.String(), errOut.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d files of shop.customers merged after 30s (%v)", n, len(files), err)
			}
		}
	}
	merged(1)
	first, err := c.ListFiles(context.Background(), "shop.customers", "")
	if err != nil {
		t.Fatal(err)
	}
	line := `{"uuid":"late","read_timestamp":"2026-01-06T23:59:00Z","source_timestamp":"2026-01-06T23:59:00Z","object":"shop_customers","read_method":"mysql-cdc-binlog","source_metadata":{"table":"customers","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.999999999","log_position":4,"change_type":"INSERT","is_deleted":false},"payload":{"id":424242}}` + "\n"
	writeSource(t, src, "shop_customers/2026/01/06/23/59/late_mysql-cdc-binlog_1_0_0.jsonl", line)
	merged(len(first) + 1)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run --watch stopped = %d, want 0\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "stopping") {
		t.Errorf("run --watch does not say it stops:\n%s", errOut.String())
	}
	want := strconv.Itoa(len(first) + 1)
	if row := summaryRow(t, out.String(), "shop.customers"); row["staged files"] != want || row["merged files"] != want || row["pending"] != "0" {
		t.Fatalf("row = %v, want %s files staged and merged, none pending", row, want)
	}
	show, _, code := cli(t, "show", filepath.Join(lake, "shop", "customers"), "--format", "jsonl")
	if code != 0 || !strings.Contains(show, `"id":424242`) {
		t.Fatalf("show of the late row = %d %q", code, show)
	}
}
