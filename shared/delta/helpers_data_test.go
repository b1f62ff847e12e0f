package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// pqMemStore is a minimal in-memory objstore.Store for the data-file tests
// (the real backends live in package objstore and are tested there).
type pqMemStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	gen     int64
}

func newPQMemStore() *pqMemStore { return &pqMemStore{objects: map[string][]byte{}} }

func (s *pqMemStore) NewReader(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, objstore.ErrNotExist)
	}
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	end := int64(len(b))
	if length >= 0 && offset+length < end {
		end = offset + length
	}
	return io.NopCloser(bytes.NewReader(b[offset:end])), nil
}

func (s *pqMemStore) Stat(_ context.Context, name string) (objstore.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[name]
	if !ok {
		return objstore.Info{}, fmt.Errorf("%s: %w", name, objstore.ErrNotExist)
	}
	return objstore.Info{Name: name, Size: int64(len(b)), Generation: 1}, nil
}

func (s *pqMemStore) Write(_ context.Context, name string, r io.Reader, opts objstore.WriteOptions) (objstore.Info, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return objstore.Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[name]; ok && opts.IfAbsent {
		return objstore.Info{}, fmt.Errorf("%s: %w", name, objstore.ErrExists)
	}
	s.objects[name] = b
	s.gen++
	return objstore.Info{Name: name, Size: int64(len(b)), Generation: s.gen, Updated: time.Now()}, nil
}

func (s *pqMemStore) List(_ context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	s.mu.Lock()
	var names []string
	for n := range s.objects {
		if strings.HasPrefix(n, prefix) && n >= startAt {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		info, err := s.Stat(context.Background(), n)
		if err != nil {
			continue
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

func (s *pqMemStore) Delete(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[name]; !ok {
		return objstore.ErrNotExist
	}
	delete(s.objects, name)
	return nil
}

func (s *pqMemStore) URL() string { return "mem://" }

func (s *pqMemStore) Close() error { return nil }

// pqFixtureStore loads a Delta fixture table into memory.
func pqFixtureStore(t *testing.T, table string) *pqMemStore {
	t.Helper()
	dir := fixture.Path(t, "delta", table)
	s := newPQMemStore()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s.objects[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("load fixture %s: %v", table, err)
	}
	return s
}

// pqReplay is a deliberately tiny replay of JSON commits (no checkpoints)
// up to version (-1 = all), enough to find a fixture's live files; the real
// log replay lives in log.go and is tested there.
func pqReplay(t *testing.T, s *pqMemStore, version int) (Metadata, []Add) {
	t.Helper()
	var commits []string
	for n := range s.objects {
		if strings.HasPrefix(n, "_delta_log/") && strings.HasSuffix(n, ".json") {
			commits = append(commits, n)
		}
	}
	sort.Strings(commits)
	var md Metadata
	live := map[string]Add{}
	for i, c := range commits {
		if version >= 0 && i > version {
			break
		}
		dec := json.NewDecoder(bytes.NewReader(s.objects[c]))
		for {
			var a Action
			if err := dec.Decode(&a); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("decode %s: %v", c, err)
			}
			switch {
			case a.MetaData != nil:
				md = *a.MetaData
			case a.Add != nil:
				live[pqFileKey(a.Add.Path, a.Add.DeletionVector)] = *a.Add
			case a.Remove != nil:
				delete(live, pqFileKey(a.Remove.Path, a.Remove.DeletionVector))
			}
		}
	}
	adds := make([]Add, 0, len(live))
	for _, a := range live {
		adds = append(adds, a)
	}
	sort.Slice(adds, func(i, j int) bool { return adds[i].Path < adds[j].Path })
	return md, adds
}

func pqFileKey(path string, dv *DeletionVector) string {
	if dv == nil {
		return path
	}
	return path + "#" + dv.StorageType + dv.PathOrInlineDv
}

// pqReadTable reads every live file of a fixture table.
func pqReadTable(t *testing.T, s *pqMemStore, version int, opts ReadOptions) (value.StructType, [][]any) {
	t.Helper()
	md, adds := pqReplay(t, s, version)
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]any
	for _, a := range adds {
		err := ReadFile(context.Background(), s, md, a, opts, func(row []any) error {
			rows = append(rows, row)
			return nil
		})
		if err != nil {
			t.Fatalf("ReadFile(%s): %v", a.Path, err)
		}
	}
	return schema, rows
}

// pqRowsJSON renders rows with the canonical value JSON, sorted, for
// order-independent comparison.
func pqRowsJSON(t *testing.T, st value.StructType, rows [][]any) []string {
	t.Helper()
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		b, err := value.AppendRowJSON(nil, st, r)
		if err != nil {
			t.Fatalf("encode row %v: %v", r, err)
		}
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

// pqEqual compares values in the shared/value representation exactly:
// same Go types, NaN equal to NaN, decimals equal in value and scale.
// sameFloat is equality that tells -0 from +0 and holds for NaN == NaN.
func sameFloat(x, y float64) bool {
	return x == y && math.Signbit(x) == math.Signbit(y) || x != x && y != y
}

func pqEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case float32:
		y, ok := b.(float32)
		return ok && sameFloat(float64(x), float64(y))
	case float64:
		y, ok := b.(float64)
		return ok && sameFloat(x, y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case value.Decimal:
		y, ok := b.(value.Decimal)
		return ok && x.Scale == y.Scale && x.Unscaled.Cmp(y.Unscaled) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pqEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case []value.MapEntry:
		y, ok := b.([]value.MapEntry)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pqEqual(x[i].Key, y[i].Key) || !pqEqual(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	}
	return a == b
}

func pqBig(n int64) *big.Int { return big.NewInt(n) }
