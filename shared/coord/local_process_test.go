package coord_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
func mergeSome(t *testing.T, c coord.Coordinator, holder string) {
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
