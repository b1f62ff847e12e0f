package coord_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Environment of the helper process that TestLocalTwoProcesses starts.
const (
	helperDirEnv  = "DSDELTA_COORD_HELPER_DIR"
	helperNameEnv = "DSDELTA_COORD_HELPER_NAME"
)

const processFiles = 24

// processFile is file n of the two-process test; both processes register
// the same files, like two deliveries of each notification.
func processFile(n int) coord.FileRecord {
	return coord.FileRecord{
		Table: "db.proc", Bucket: "src", Name: fmt.Sprintf("db_proc/2026/01/01/00/00/f%03d.jsonl", n),
		Generation: int64(n + 1), Size: 10, StagedPath: fmt.Sprintf("_staging/db.proc/%03d.parquet", n),
		Events: 1, MaxSourceTime: time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC),
	}
}

// TestLocalTwoProcesses runs two OS processes on one lake directory, each
// registering the same files and merging batches under the lease, and checks
// that every file was created once and merged once, in contiguous batches.
func TestLocalTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two processes")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var outs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLocalProcessHelper$")
		cmds[i].Env = append(os.Environ(), helperDirEnv+"="+dir, fmt.Sprintf("%s=p%d", helperNameEnv, i))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatalf("start helper %d: %v", i, err)
		}
	}
	created := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i].String())
		}
		_, after, ok := strings.Cut(outs[i].String(), "created=")
		n, err := strconv.Atoi(strings.Fields(after + " ")[0])
		if !ok || err != nil {
			t.Fatalf("helper %d did not report its count:\n%s", i, outs[i].String())
		}
		t.Logf("helper %d created %d of the %d records", i, n, processFiles)
		created += n
	}
	if created != processFiles {
		t.Fatalf("the two processes created %d records, want %d (one per file)", created, processFiles)
	}
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newLocal(t, store, nil)
	s, err := c.Status(context.Background(), "db.proc")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if s.Files != processFiles || s.Pending != 0 || s.OpenBatchSeq != 0 || s.Batches != s.LastBatchSeq {
		t.Fatalf("status = %+v, want %d files merged once each, none pending, batches 1..%d all done", s, processFiles, s.LastBatchSeq)
	}
	merged, err := c.ListFiles(context.Background(), "db.proc", coord.StateMerged)
	if err != nil || len(merged) != processFiles {
		t.Fatalf("ListFiles(merged) = %d, %v; want %d", len(merged), err, processFiles)
	}
}

// TestLocalProcessHelper is the body of a helper process; it does nothing
// in a normal test run.
func TestLocalProcessHelper(t *testing.T) {
	dir, name := os.Getenv(helperDirEnv), os.Getenv(helperNameEnv)
	if dir == "" {
		t.Skip("helper process of TestLocalTwoProcesses")
	}
	ctx := context.Background()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newLocal(t, store, nil)
	created := 0
	for n := range processFiles {
		_, ok, err := c.RegisterFile(ctx, processFile(n))
		if err != nil {
			t.Fatalf("RegisterFile: %v", err)
		}
		if ok {
			created++
		}
		if n%6 == 5 {
			mergeSome(t, c, name)
		}
	}
	fmt.Printf("created=%d\n", created)
	for {
		mergeSome(t, c, name)
		s, err := c.Status(ctx, "db.proc")
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if s.Pending == 0 && s.OpenBatchSeq == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mergeSome takes the lease if it is free and completes batches of at most
// four files until none is pending.
func mergeSome(t *testing.T, c *coord.Local, holder string) {
	ctx := context.Background()
	l, err := c.Acquire(ctx, "db.proc", holder, 10*time.Second)
	if errors.Is(err, coord.ErrLeaseHeld) {
		return
	}
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer func() {
		if err := c.Release(ctx, l); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
	for {
		b, err := c.NextBatch(ctx, l, "db.proc", coord.BatchLimits{Files: 4})
		if errors.Is(err, coord.ErrNoWork) {
			return
		}
		if err != nil {
			t.Fatalf("NextBatch: %v", err)
		}
		if err := c.CompleteBatch(ctx, l, b, coord.BatchStats{Events: int64(len(b.Files))}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
	}
}

// helperHoldEnv makes the helper process TestLocalLeaseHolderHelper hold a
// lease instead of merging.
const helperHoldEnv = "DSDELTA_COORD_HELPER_HOLD"

// TestLocalLeaseOfAKilledProcess has a child process take a table's lease
// and open a batch, checks that the lease is not taken over while the child
// lives, SIGKILLs it, and checks that the next acquisition on this host
// takes the lease over at once (not after its hour-long ttl) with a greater
// token, that the child's lease can no longer do anything, and that the
// child's batch is resumed.
func TestLocalLeaseOfAKilledProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "freebsd" {
		t.Skipf("no process liveness check on %s", runtime.GOOS)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newLocal(t, store, nil)
	for n := range 3 {
		if _, _, err := c.RegisterFile(ctx, processFile(n)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLocalLeaseHolderHelper$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperHoldEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	var old coord.Lease
	var expires string
	var seq int64
	if _, serr := fmt.Sscanf(line, "holding %s %s %d %s %d", &old.Table, &old.Holder, &old.Token, &expires, &seq); err != nil || serr != nil {
		t.Fatalf("helper did not report its lease (%q, %v, %v):\n%s", line, err, serr, stderr.String())
	}
	if old.Expires, err = time.Parse(time.RFC3339Nano, expires); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "db.proc", "next", time.Minute); !errors.Is(err, coord.ErrLeaseHeld) {
		t.Fatalf("Acquire while the holder lives = %v, want ErrLeaseHeld", err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no clean-up runs
		t.Fatal(err)
	}
	_ = cmd.Wait() // reaped: the pid is gone
	l, err := c.Acquire(ctx, "db.proc", "next", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed = %v, want a takeover at once", err)
	}
	if l.Token <= old.Token {
		t.Fatalf("takeover token %d, want > %d", l.Token, old.Token)
	}
	wantLost(t, c, old, coord.Batch{Table: "db.proc", Seq: seq})
	b, err := c.NextBatch(ctx, l, "db.proc", coord.BatchLimits{})
	if err != nil || b.Seq != seq {
		t.Fatalf("NextBatch after the takeover = seq %d, %v; want the killed holder's batch %d", b.Seq, err, seq)
	}
	if err := c.CompleteBatch(ctx, l, b, coord.BatchStats{}); err != nil {
		t.Fatalf("CompleteBatch: %v", err)
	}
}

// TestLocalLeaseHolderHelper is the body of the helper process of
// TestLocalLeaseOfAKilledProcess: it takes the lease for an hour, opens a
// batch, reports both on stdout and waits to be killed.
func TestLocalLeaseHolderHelper(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" || os.Getenv(helperHoldEnv) == "" {
		t.Skip("helper process of TestLocalLeaseOfAKilledProcess")
	}
	ctx := context.Background()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newLocal(t, store, nil)
	l, err := c.Acquire(ctx, "db.proc", fmt.Sprintf("helper-%d", os.Getpid()), time.Hour)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	b, err := c.NextBatch(ctx, l, "db.proc", coord.BatchLimits{Files: 2})
	if err != nil {
		t.Fatalf("NextBatch: %v", err)
	}
	fmt.Printf("holding %s %s %d %s %d\n", l.Table, l.Holder, l.Token, l.Expires.Format(time.RFC3339Nano), b.Seq)
	time.Sleep(time.Minute)
	t.Fatal("not killed")
}
