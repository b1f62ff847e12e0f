package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/objstore/objstoretest"
)

func newLocal(t *testing.T, dir string) *objstore.Bucket {
	t.Helper()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocalCreatesAMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lake", "root")
	s := newLocal(t, dir)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("NewLocal did not create %s: %v", dir, err)
	}
	if s.URL() != dir {
		t.Errorf("URL = %q, want %q", s.URL(), dir)
	}
}

func TestLocalStoresObjectsAsPlainFiles(t *testing.T) {
	dir := t.TempDir()
	s := newLocal(t, dir)
	if _, err := objstore.WriteBytes(t.Context(), s, "t/_delta_log/0.json", []byte("{}"), objstore.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "t", "_delta_log", "0.json"))
	if err != nil || string(got) != "{}" {
		t.Fatalf("file content %q, %v; want {}", got, err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "t", "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the object (temporary file left behind?)", len(entries))
	}
}

func TestLocalHidesTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := newLocal(t, dir)
	if _, err := objstore.WriteBytes(t.Context(), s, "d/visible", []byte("x"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of a write leaves behind.
	if err := os.WriteFile(filepath.Join(dir, "d", ".objstore-tmp-123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := objstoretest.ListNames(t, s, ""); !slices.Equal(got, []string{"d/visible"}) {
		t.Errorf("list = %q, want [d/visible]", got)
	}
	for _, name := range []string{".objstore-tmp-123", "d/.objstore-tmp-123", ".objstore-tmp-x/y"} {
		if _, err := s.Stat(t.Context(), name); !errors.Is(err, objstore.ErrInvalidName) {
			t.Errorf("Stat %s: %v, want ErrInvalidName (reserved prefix)", name, err)
		}
	}
}

func TestLocalDeleteRemovesEmptiedDirectoriesUpToTheRoot(t *testing.T) {
	dir := t.TempDir()
	s := newLocal(t, dir)
	ctx := t.Context()
	for _, name := range []string{"a/b/c/d", "a/keep"} {
		if _, err := objstore.WriteBytes(ctx, s, name, []byte(name), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a/b still exists after its last object was deleted: %v", err)
	}
	if err := s.Delete(ctx, "a/keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a still exists after its last object was deleted: %v", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Errorf("the root was removed: %v", err)
	}
}

func TestLocalNameThatIsAlsoADirectoryFailsCleanly(t *testing.T) {
	s := newLocal(t, t.TempDir())
	ctx := t.Context()
	if _, err := objstore.WriteBytes(ctx, s, "a/b/c", []byte("x"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []objstore.WriteOptions{{}, {IfAbsent: true}} {
		if _, err := objstore.WriteBytes(ctx, s, "a/b", []byte("y"), opts); err == nil {
			t.Errorf("write a/b over the directory a/b (%+v) succeeded", opts)
		}
	}
	if _, err := objstore.WriteBytes(ctx, s, "a/b/c/d", []byte("y"), objstore.WriteOptions{}); err == nil {
		t.Error("write a/b/c/d below the object a/b/c succeeded")
	}
	if got := objstoretest.ListNames(t, s, ""); !slices.Equal(got, []string{"a/b/c"}) {
		t.Errorf("list = %q, want [a/b/c]", got)
	}
}

func TestLocalListBelowAnObjectIsEmpty(t *testing.T) {
	t.Parallel()
	s := newLocal(t, t.TempDir())
	if _, err := objstore.WriteBytes(t.Context(), s, "a/obj", []byte("x"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"a/obj/", "a/obj/x/", "missing/dir/"} {
		if got := objstoretest.ListNames(t, s, prefix); len(got) != 0 {
			t.Errorf("list %q = %q, want nothing", prefix, got)
		}
	}
}

// Two Local instances on one directory stand in for two processes: nothing
// in memory is shared, only the filesystem.
func TestLocalInstancesOnOneDirectoryRace(t *testing.T) {
	dir := t.TempDir()
	stores := []*objstore.Bucket{newLocal(t, dir), newLocal(t, dir)}
	ctx := t.Context()
	t.Run("exactly one IfAbsent creator wins", func(t *testing.T) {
		for round := range 10 {
			name := fmt.Sprintf("_delta_log/%020d.json", round)
			errs := raceStores(ctx, stores, 8, func(ctx context.Context, s objstore.Store, i int) error {
				_, err := objstore.WriteBytes(ctx, s, name, []byte("writer "+strconv.Itoa(i)), objstore.WriteOptions{IfAbsent: true})
				return err
			})
			checkSingleWinner(t, stores[0], name, errs, objstore.ErrExists)
		}
	})
	t.Run("exactly one IfGenerationMatch writer wins", func(t *testing.T) {
		for round := range 5 {
			name := fmt.Sprintf("_last_checkpoint-%d", round)
			info, err := objstore.WriteBytes(ctx, stores[1], name, []byte("initial"), objstore.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			errs := raceStores(ctx, stores, 8, func(ctx context.Context, s objstore.Store, i int) error {
				_, err := objstore.WriteBytes(ctx, s, name, []byte("writer "+strconv.Itoa(i)), objstore.WriteOptions{IfGenerationMatch: info.Generation})
				return err
			})
			checkSingleWinner(t, stores[0], name, errs, objstore.ErrPrecondition)
		}
	})
}

// raceStores starts perStore writers on each store at once; writer i uses
// stores[i%len(stores)].
func raceStores(ctx context.Context, stores []*objstore.Bucket, perStore int, writer func(context.Context, objstore.Store, int) error) []error {
	n := perStore * len(stores)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = writer(ctx, stores[i%len(stores)], i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func checkSingleWinner(t *testing.T, s objstore.Store, name string, errs []error, loserErr error) {
	t.Helper()
	var winners []int
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case !errors.Is(err, loserErr):
			t.Errorf("writer %d: %v, want success or %v", i, err, loserErr)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%s: writers %v won, want exactly one", name, winners)
	}
	got, err := objstore.ReadAll(t.Context(), s, name)
	if err != nil {
		t.Fatal(err)
	}
	if want := "writer " + strconv.Itoa(winners[0]); string(got) != want {
		t.Errorf("%s holds %q, want the winner's %q", name, got, want)
	}
}

// helperEnv makes the test binary act as one racing process of
// TestLocalProcessesRaceForNames instead of running tests.
const helperEnv = "OBJSTORE_TEST_RACE_DIR"

func TestLocalProcessesRaceForNames(t *testing.T) {
	if dir := os.Getenv(helperEnv); dir != "" {
		raceAsHelperProcess(t, dir)
		return
	}
	const processes, names = 4, 100
	dir := t.TempDir()
	// All processes start creating at the same instant, well after they have
	// all started, so that they really contend for each name.
	startAt := time.Now().Add(400 * time.Millisecond).UnixNano()
	var wg sync.WaitGroup
	outputs := make([][]byte, processes)
	errs := make([]error, processes)
	for p := range processes {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLocalProcessesRaceForNames$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+dir, "OBJSTORE_TEST_PROCESS="+strconv.Itoa(p), "OBJSTORE_TEST_NAMES="+strconv.Itoa(names),
				"OBJSTORE_TEST_START="+strconv.FormatInt(startAt, 10))
			outputs[p], errs[p] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	wins := map[string]string{} // name -> winning process
	for p := range processes {
		if errs[p] != nil {
			t.Fatalf("process %d: %v\n%s", p, errs[p], outputs[p])
		}
		for line := range strings.Lines(string(outputs[p])) {
			name, ok := strings.CutPrefix(strings.TrimSpace(line), "WON ")
			if !ok {
				continue
			}
			if other, dup := wins[name]; dup {
				t.Errorf("%s won by processes %s and %d", name, other, p)
			}
			wins[name] = strconv.Itoa(p)
		}
	}
	perProcess := map[string]int{}
	for _, p := range wins {
		perProcess[p]++
	}
	t.Logf("names won per process: %v", perProcess)
	s := newLocal(t, dir)
	for i := range names {
		name := fmt.Sprintf("_delta_log/%020d.json", i)
		winner, ok := wins[name]
		if !ok {
			t.Errorf("%s: no process won", name)
			continue
		}
		got, err := objstore.ReadAll(t.Context(), s, name)
		if err != nil {
			t.Fatal(err)
		}
		if want := "process " + winner; string(got) != want {
			t.Errorf("%s holds %q, want the winner's %q", name, got, want)
		}
	}
}

// raceAsHelperProcess creates every name with put-if-absent and prints the
// names it won.
func raceAsHelperProcess(t *testing.T, dir string) {
	s := newLocal(t, dir)
	p := os.Getenv("OBJSTORE_TEST_PROCESS")
	n, err := strconv.Atoi(os.Getenv("OBJSTORE_TEST_NAMES"))
	if err != nil {
		t.Fatal(err)
	}
	startAt, err := strconv.ParseInt(os.Getenv("OBJSTORE_TEST_START"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.Unix(0, startAt)))
	for i := range n {
		name := fmt.Sprintf("_delta_log/%020d.json", i)
		_, err := objstore.WriteBytes(t.Context(), s, name, []byte("process "+p), objstore.WriteOptions{IfAbsent: true})
		switch {
		case err == nil:
			fmt.Printf("WON %s\n", name)
		case !errors.Is(err, objstore.ErrExists):
			t.Fatalf("create %s: %v", name, err)
		}
	}
}

func TestLocalWritesWhileDeletesPruneTheirParentDirectories(t *testing.T) {
	// Delete removes the directories it leaves empty, up to the root. A
	// writer in a sibling directory must not fail when the parent they
	// share vanishes between MkdirAll's mkdir of the parent and of the child.
	ctx := context.Background()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 300
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				name := fmt.Sprintf("shared/parent/w%d/r%d/object", w, i)
				if _, err := s.Write(ctx, name, strings.NewReader("x"), objstore.WriteOptions{IfAbsent: true}); err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, i, err)
					return
				}
				if err := s.Delete(ctx, name); err != nil {
					errs <- fmt.Errorf("writer %d round %d: delete: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// oddReader returns data in reads of varying odd sizes, so that writes
// straddle the writeback chunks at every offset.
type oddReader struct {
	data []byte
	n    int
}

func (r *oddReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	r.n++
	k := min(len(p), len(r.data), 1+(r.n*7919)%(3<<20))
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

func TestLocalWritesAFileLargerThanSeveralWritebackChunksIntact(t *testing.T) {
	dir := t.TempDir()
	s := newLocal(t, dir)
	data := make([]byte, 21<<20+12345) // several 8 MiB writeback chunks and a tail
	for i := range data {
		data[i] = byte(i*31 + i>>13)
	}
	info, err := s.Write(t.Context(), "big/part-0.parquet", &oddReader{data: data}, objstore.WriteOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) {
		t.Errorf("Size = %d, want %d", info.Size, len(data))
	}
	got, err := os.ReadFile(filepath.Join(dir, "big", "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the file read back differs from what was written")
	}
}

// A copy to a new name is a second name of the same file (nothing read or
// written again); the copy outlives its source, a write to either name
// leaves the other as it was, and a copy onto a name that may exist is a
// file of its own with a newer generation.
func TestLocalCopiesToANewNameByLinking(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := newLocal(t, dir)
	staging, tables := objstore.Sub(s, "staging"), objstore.Sub(s, "t/history")
	if _, err := objstore.WriteBytes(ctx, staging, "part-0.parquet", []byte("staged"), objstore.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	info, err := objstore.Copy(ctx, staging, "part-0.parquet", tables, "d=1/part-0.parquet", objstore.WriteOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Stat(filepath.Join(dir, "staging", "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.Stat(filepath.Join(dir, "t", "history", "d=1", "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(src, dst) {
		t.Errorf("the copy is a file of its own, want a second name of the source")
	}
	if info.Size != 6 || info.Name != "d=1/part-0.parquet" {
		t.Errorf("copy info = %+v, want size 6 and the new name", info)
	}
	// A copy is new: however old its source, a vacuum that spares young
	// unreferenced files spares it until its commit.
	old := time.Now().Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "staging", "part-0.parquet"), old, old); err != nil {
		t.Fatal(err)
	}
	young, err := objstore.Copy(ctx, staging, "part-0.parquet", tables, "d=1/part-young.parquet", objstore.WriteOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := tables.Stat(ctx, "d=1/part-young.parquet"); err != nil || time.Since(st.Updated) > time.Minute || st.Generation != young.Generation {
		t.Errorf("a copy of a 30-day-old object: %+v, %v (copy said %+v); want it modified now", st, err, young)
	}
	if _, err := objstore.Copy(ctx, staging, "part-0.parquet", tables, "d=1/part-0.parquet", objstore.WriteOptions{IfAbsent: true}); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("copy onto an existing name with IfAbsent: %v, want ErrExists", err)
	}
	// A new object under the source's name leaves the copy as it was.
	if _, err := objstore.WriteBytes(ctx, staging, "part-0.parquet", []byte("replaced"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := staging.Delete(ctx, "part-0.parquet"); err != nil {
		t.Fatal(err)
	}
	if got, err := objstore.ReadAll(ctx, tables, "d=1/part-0.parquet"); err != nil || string(got) != "staged" {
		t.Fatalf("copy after its source was replaced and deleted: %q, %v; want \"staged\"", got, err)
	}
	// A copy onto a name that exists, without IfAbsent, replaces it with a
	// file of its own whose generation is newer.
	if _, err := objstore.WriteBytes(ctx, staging, "part-1.parquet", []byte("other"), objstore.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	over, err := objstore.Copy(ctx, staging, "part-1.parquet", tables, "d=1/part-0.parquet", objstore.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if over.Generation <= info.Generation {
		t.Errorf("overwriting copy has generation %d, not past the replaced object's %d", over.Generation, info.Generation)
	}
	src1, _ := os.Stat(filepath.Join(dir, "staging", "part-1.parquet"))
	dst1, _ := os.Stat(filepath.Join(dir, "t", "history", "d=1", "part-0.parquet"))
	if os.SameFile(src1, dst1) {
		t.Errorf("an overwriting copy shares its source's file, whose generation it then keeps")
	}
	if _, err := objstore.Copy(ctx, staging, "gone.parquet", tables, "d=2/x.parquet", objstore.WriteOptions{IfAbsent: true}); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("copy of a missing object: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t", "history", "d=2")); err == nil {
		t.Errorf("a failed copy left its directory behind")
	}
}
