package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// childRunner is the program merges run in: the mergechild command built
// for this run (it links what a merge function links), or this binary
// re-executed in its hidden child mode when the command cannot be built.
type childRunner struct {
	exe  string
	self bool
	env  []string // set in the child's environment, over the driver's
}

// withEnv returns the runner with env (NAME=value) set in its children's
// environment.
func (c childRunner) withEnv(env ...string) childRunner {
	c.env = append(append([]string(nil), c.env...), env...)
	return c
}

// childEnv is the driver's environment without the Go collector's
// settings, which the bench sets itself (withEnv), then env.
func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// prepareChild builds ./mergechild of the bench module into dir. Outside
// the bench module (a copied binary) it falls back to re-executing itself,
// whose RSS then includes the linked DuckDB library.
func prepareChild(ctx context.Context, dir string) (childRunner, string) {
	self, err := os.Executable()
	fallback := func(why string) (childRunner, string) {
		return childRunner{exe: self, self: true}, "Merges ran in this binary re-executed (" + why + "), so peak RSS includes the DuckDB library it links (about 28 MiB resident at start on linux/amd64)."
	}
	if err != nil {
		return childRunner{}, "find own executable: " + err.Error()
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fallback("no go tool to build mergechild")
	}
	out, err := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	path, modDir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil || path != "github.com/dsdelta/dsdelta/bench" {
		return fallback("not run from the bench module")
	}
	exe := filepath.Join(dir, "mergechild")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", exe, "./mergechild")
	cmd.Dir = modDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fallback("go build ./mergechild failed: " + firstLine(string(b)))
	}
	return childRunner{exe: exe}, "Merges ran in the mergechild command (built for the run; it links dsdelta's cdc, delta and objstore but not DuckDB), one process per merge, so peak RSS is the merge's own."
}

// mergeInChild runs one merge in the child program.
func mergeInChild(ctx context.Context, child childRunner, dir string, rows int64, mode, cpuProfile, heapProfile string) (mergebench.ChildResult, error) {
	return mergeModeInChild(ctx, child, dir, rows, mode, "", cpuProfile, heapProfile)
}

// mergeModeInChild is mergeInChild into a table of table mode tableMode.
func mergeModeInChild(ctx context.Context, child childRunner, dir string, rows int64, mode, tableMode, cpuProfile, heapProfile string) (mergebench.ChildResult, error) {
	var r mergebench.ChildResult
	args := []string{"-dir", dir, "-rows", strconv.FormatInt(rows, 10), "-mode", mode}
	if tableMode != "" {
		args = append(args, "-table-mode", tableMode)
	}
	if _, err := child.run(ctx, args, cpuProfile, heapProfile, &r); err != nil {
		return r, fmt.Errorf("merge child %d rows %s: %w", rows, mode, err)
	}
	return r, nil
}

// run runs the child program with args and the profile paths, decodes the
// JSON it prints into out, and returns the child's peak RSS as the kernel
// accounted it (rusage maxrss), in KiB, or 0 when that figure cannot be
// told from this process's own (see childMaxRSS).
func (c childRunner) run(ctx context.Context, args []string, cpuProfile, heapProfile string, out any) (int64, error) {
	if c.self {
		args = append([]string{"-merge-child"}, args...)
	}
	if cpuProfile != "" {
		args = append(args, "-cpuprofile", cpuProfile)
	}
	if heapProfile != "" {
		args = append(args, "-heapprofile", heapProfile)
	}
	cmd := exec.CommandContext(ctx, c.exe, args...)
	cmd.Env = childEnv(c.env)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return 0, fmt.Errorf("parse child output %q: %w", b, err)
	}
	var maxRSS int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// Read after the child ended: no higher than this process's mark
		// when the child started, which is all the child can have borrowed.
		own, _ := mergebench.PeakRSSKiB()
		maxRSS = childMaxRSS(ru.Maxrss, own) // KiB on Linux
	}
	return maxRSS, nil
}

// childMaxRSS is what a child's rusage maxrss (KiB) tells of the child
// itself, given this process's high-water RSS (KiB) since before it
// started the child; 0 when it tells nothing. os/exec starts a child with
// vfork: until it execs, the child runs in this process's memory, and the
// exec folds that memory's high-water mark into the child's maxrss (Linux
// fs/exec.c exec_mmap: setmax_mm_hiwater_rss(&tsk->signal->maxrss,
// old_mm)). A maxrss up to this process's own mark may therefore be the
// driver's — after DuckDB's merges it is over 1 GiB, and it was reported
// as the backfill's peak — while a greater one can only be the child's.
// The child's VmHWM, which starts at the exec, is its own in every case.
func childMaxRSS(maxRSS, driverPeak int64) int64 {
	if maxRSS <= driverPeak {
		return 0
	}
	return maxRSS
}

// touchedFiles are the state files the merge removed (rewrote) or gave a
// new deletion vector, as absolute paths, and the row count of the table
// after the merge.
func touchedFiles(ctx context.Context, d mergebench.TableDirs, base *delta.Snapshot) ([]string, int64, error) {
	store, err := objstore.NewLocal(d.State())
	if err != nil {
		return nil, 0, err
	}
	after, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("read merged state table: %w", err)
	}
	// A file is the pair of its path and its deletion vector (PROTOCOL.md
	// "Deletion Vectors"): a new vector changes it as a rewrite does.
	key := func(a delta.Add) string {
		if a.DeletionVector == nil {
			return a.Path
		}
		return a.Path + "\x00" + a.DeletionVector.PathOrInlineDv + "@" + strconv.Itoa(int(ptrOr(a.DeletionVector.Offset)))
	}
	live := map[string]bool{}
	for _, a := range after.Files() {
		live[key(a)] = true
	}
	var out []string
	for _, a := range base.Files() {
		if !live[key(a)] {
			out = append(out, filepath.Join(d.State(), a.Path))
		}
	}
	n, _ := after.NumRecords()
	return out, n, nil
}

// duckMerge is the baseline: rewrite the touched files without the batch's
// keys and with its upserts (anti-join + union), snappy parquet, as one
// statement. It returns the elapsed time and the rows written.
func duckMerge(ctx context.Context, db *sql.DB, touched []string, batchFile, out string) (time.Duration, int64, error) {
	quoted := make([]string, len(touched))
	for i, p := range touched {
		quoted[i] = sqlString(p)
	}
	q := fmt.Sprintf(`COPY (
  SELECT t.* FROM read_parquet([%s]) t ANTI JOIN read_parquet(%s) b ON t.id = b.id
  UNION ALL
  SELECT * EXCLUDE (bench_delete) FROM read_parquet(%s) WHERE NOT bench_delete
) TO %s (FORMAT parquet, COMPRESSION snappy)`, strings.Join(quoted, ", "), sqlString(batchFile), sqlString(batchFile), sqlString(out))
	start := time.Now()
	if len(touched) == 0 {
		q = fmt.Sprintf(`COPY (SELECT * EXCLUDE (bench_delete) FROM read_parquet(%s) WHERE NOT bench_delete) TO %s (FORMAT parquet, COMPRESSION snappy)`, sqlString(batchFile), sqlString(out))
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return 0, 0, fmt.Errorf("duckdb merge: %w", err)
	}
	elapsed := time.Since(start)
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+sqlString(out)+")").Scan(&n); err != nil {
		return 0, 0, fmt.Errorf("count duckdb merge output: %w", err)
	}
	return elapsed, n, nil
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// fileRows sums numRecords of the given absolute paths in a snapshot.
func fileRows(base *delta.Snapshot, root string, paths []string) int64 {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	var n int64
	for _, a := range base.Files() {
		if want[filepath.Join(root, a.Path)] {
			st, err := delta.ParseStats(a.Stats)
			if err == nil {
				n += st.NumRecords
			}
		}
	}
	return n
}
