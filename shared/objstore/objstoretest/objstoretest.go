package objstoretest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Run runs the suite. newStore must return an empty store for each call; the
// subtests run in parallel, each on its own store.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"written object reads back with its info", testRoundTrip},
		{"empty object round trips", testEmptyObject},
		{"ranged reads return the requested bytes", testRangedReads},
		{"missing object is ErrNotExist for every operation", testMissing},
		{"overwrite replaces content and changes generation", testOverwrite},
		{"IfGenerationMatch writes only over that generation", testIfGenerationMatch},
		{"IfAbsent creates once then fails with ErrExists", testIfAbsent},
		{"contradictory preconditions are rejected", testContradictoryOptions},
		{"failed write leaves no partial object", testFailedWrite},
		{"list returns names in byte order with prefix and startAt", testList},
		{"list stops at the callback's error", testListStops},
		{"delete removes the object and only it", testDelete},
		{"invalid names are rejected by every operation", testInvalidNames},
		{"unusual but valid names work", testValidNames},
		{"sub view maps names under its prefix", testSub},
		{"reader at reads any range", testReaderAt},
		{"exactly one concurrent IfAbsent creator wins", testIfAbsentRace},
		{"exactly one concurrent IfGenerationMatch writer wins", testGenerationRace},
		{"a closed store and its views fail every call with ErrClosed", testClosed},
		{"copy between views makes an equal object", testCopy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func write(t *testing.T, s objstore.Store, name, content string) objstore.Info {
	t.Helper()
	info, err := objstore.WriteBytes(t.Context(), s, name, []byte(content), objstore.WriteOptions{})
	if err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return info
}

func read(t *testing.T, s objstore.Store, name string) string {
	t.Helper()
	data, err := objstore.ReadAll(t.Context(), s, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(data)
}

func stat(t *testing.T, s objstore.Store, name string) objstore.Info {
	t.Helper()
	info, err := s.Stat(t.Context(), name)
	if err != nil {
		t.Fatalf("stat %s: %v", name, err)
	}
	return info
}

func list(t *testing.T, s objstore.Store, prefix, startAt string) []objstore.Info {
	t.Helper()
	var infos []objstore.Info
	err := s.List(t.Context(), prefix, startAt, func(info objstore.Info) error {
		infos = append(infos, info)
		return nil
	})
	if err != nil {
		t.Fatalf("list prefix %q startAt %q: %v", prefix, startAt, err)
	}
	return infos
}

// ListNames lists the names under prefix, failing the test on an error.
func ListNames(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	return names(list(t, s, prefix, ""))
}

func names(infos []objstore.Info) []string {
	out := make([]string, len(infos))
	for i, info := range infos {
		out[i] = info.Name
	}
	return out
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	const name, content = "dir/sub/object.json", `{"hello":"world"}`
	before := time.Now().Add(-time.Minute)
	info := write(t, s, name, content)
	if info.Name != name || info.Size != int64(len(content)) || info.Generation <= 0 {
		t.Errorf("Write info = %+v, want name %q, size %d, generation > 0", info, name, len(content))
	}
	if info.Updated.Before(before) || info.Updated.After(time.Now().Add(time.Minute)) {
		t.Errorf("Write info Updated = %v, want about now", info.Updated)
	}
	got := stat(t, s, name)
	if got.Name != name || got.Size != info.Size || got.Generation != info.Generation || !got.Updated.Equal(info.Updated) {
		t.Errorf("Stat = %+v, want %+v", got, info)
	}
	if data := read(t, s, name); data != content {
		t.Errorf("read %q, want %q", data, content)
	}
}

func testEmptyObject(t *testing.T, s objstore.Store) {
	info := write(t, s, "empty", "")
	if info.Size != 0 || info.Generation <= 0 {
		t.Errorf("Write info = %+v, want size 0 and generation > 0", info)
	}
	if data := read(t, s, "empty"); data != "" {
		t.Errorf("read %q, want empty", data)
	}
	if got := names(list(t, s, "", "")); !slices.Equal(got, []string{"empty"}) {
		t.Errorf("list = %q, want [empty]", got)
	}
}

func testRangedReads(t *testing.T, s objstore.Store) {
	write(t, s, "digits", "0123456789")
	tests := []struct {
		name           string
		offset, length int64
		want           string
	}{
		{"whole object with length -1", 0, -1, "0123456789"},
		{"middle range", 3, 4, "3456"},
		{"single last byte", 9, 1, "9"},
		{"from offset to end with length -1", 7, -1, "789"},
		{"length past the end is cut at the end", 7, 100, "789"},
		{"zero length is empty", 2, 0, ""},
		{"offset at the end is empty", 10, -1, ""},
		{"offset past the end is empty", 25, 5, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := s.NewReader(t.Context(), "digits", tc.offset, tc.length)
			if err != nil {
				t.Fatalf("NewReader(%d, %d): %v", tc.offset, tc.length, err)
			}
			defer rc.Close()
			data, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("read (%d, %d): %v", tc.offset, tc.length, err)
			}
			if string(data) != tc.want {
				t.Errorf("read (%d, %d) = %q, want %q", tc.offset, tc.length, data, tc.want)
			}
		})
	}
	t.Run("negative offset is an error", func(t *testing.T) {
		if rc, err := s.NewReader(t.Context(), "digits", -3, -1); err == nil {
			rc.Close()
			t.Error("NewReader(-3, -1) succeeded, want an error")
		}
	})
}

func testMissing(t *testing.T, s objstore.Store) {
	write(t, s, "dir/present", "x")
	for _, name := range []string{"absent", "dir/absent", "dir/present/below", "dir"} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := s.Stat(ctx, name); !errors.Is(err, objstore.ErrNotExist) {
				t.Errorf("Stat: %v, want ErrNotExist", err)
			}
			for _, length := range []int64{-1, 0, 4} {
				if rc, err := s.NewReader(ctx, name, 0, length); !errors.Is(err, objstore.ErrNotExist) {
					if err == nil {
						rc.Close()
					}
					t.Errorf("NewReader(0, %d): %v, want ErrNotExist", length, err)
				}
			}
			if err := s.Delete(ctx, name); !errors.Is(err, objstore.ErrNotExist) {
				t.Errorf("Delete: %v, want ErrNotExist", err)
			}
		})
	}
}

func testOverwrite(t *testing.T, s objstore.Store) {
	gens := map[int64]int{}
	var last objstore.Info
	for i := range 5 {
		content := fmt.Sprintf("version %d", i)
		last = write(t, s, "obj", content)
		if prev, seen := gens[last.Generation]; seen {
			t.Errorf("write %d has the generation %d of write %d", i, last.Generation, prev)
		}
		gens[last.Generation] = i
		if got := read(t, s, "obj"); got != content {
			t.Errorf("after write %d read %q, want %q", i, got, content)
		}
	}
	if got := stat(t, s, "obj"); got.Generation != last.Generation || got.Size != last.Size {
		t.Errorf("Stat = %+v, want generation %d size %d", got, last.Generation, last.Size)
	}
}

func testIfGenerationMatch(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	g1 := write(t, s, "obj", "v1").Generation
	info, err := objstore.WriteBytes(ctx, s, "obj", []byte("v2"), objstore.WriteOptions{IfGenerationMatch: g1})
	if err != nil {
		t.Fatalf("write with the current generation: %v", err)
	}
	if info.Generation == g1 {
		t.Errorf("conditional write kept generation %d", g1)
	}
	_, err = objstore.WriteBytes(ctx, s, "obj", []byte("v3"), objstore.WriteOptions{IfGenerationMatch: g1})
	if !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("write with a stale generation: %v, want ErrPrecondition", err)
	}
	if got := read(t, s, "obj"); got != "v2" {
		t.Errorf("after the failed write read %q, want v2", got)
	}
	if got := stat(t, s, "obj").Generation; got != info.Generation {
		t.Errorf("after the failed write generation %d, want %d", got, info.Generation)
	}
	_, err = objstore.WriteBytes(ctx, s, "missing", []byte("x"), objstore.WriteOptions{IfGenerationMatch: g1})
	if !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("conditional write of a missing object: %v, want ErrPrecondition", err)
	}
	if _, err := s.Stat(ctx, "missing"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("failed conditional write created the object: Stat: %v", err)
	}
}

func testIfAbsent(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	absent := objstore.WriteOptions{IfAbsent: true}
	first, err := objstore.WriteBytes(ctx, s, "_delta_log/00000000000000000000.json", []byte("first"), absent)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if first.Generation <= 0 || first.Size != 5 {
		t.Errorf("create info = %+v", first)
	}
	_, err = objstore.WriteBytes(ctx, s, "_delta_log/00000000000000000000.json", []byte("second"), absent)
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if got := read(t, s, "_delta_log/00000000000000000000.json"); got != "first" {
		t.Errorf("after the failed create read %q, want first", got)
	}
	if got := stat(t, s, "_delta_log/00000000000000000000.json").Generation; got != first.Generation {
		t.Errorf("after the failed create generation %d, want %d", got, first.Generation)
	}
	if err := s.Delete(ctx, "_delta_log/00000000000000000000.json"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := objstore.WriteBytes(ctx, s, "_delta_log/00000000000000000000.json", []byte("third"), absent); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	if got := read(t, s, "_delta_log/00000000000000000000.json"); got != "third" {
		t.Errorf("after re-create read %q, want third", got)
	}
}

func testContradictoryOptions(t *testing.T, s objstore.Store) {
	g := write(t, s, "obj", "v1").Generation
	_, err := objstore.WriteBytes(t.Context(), s, "obj", []byte("v2"), objstore.WriteOptions{IfAbsent: true, IfGenerationMatch: g})
	if err == nil {
		t.Error("write with IfAbsent and IfGenerationMatch succeeded, want an error")
	}
	if got := read(t, s, "obj"); got != "v1" {
		t.Errorf("read %q, want v1", got)
	}
}

// failingReader yields some bytes, then an error, like a broken upload source.
type failingReader struct{ sent bool }

var errSource = errors.New("source broke")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.sent {
		return 0, errSource
	}
	r.sent = true
	return copy(p, "partial content"), nil
}

func testFailedWrite(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	write(t, s, "existing", "old")
	for _, tc := range []struct {
		name string
		opts objstore.WriteOptions
	}{
		{"plain", objstore.WriteOptions{}},
		{"if absent", objstore.WriteOptions{IfAbsent: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Write(ctx, "new-"+strings.ReplaceAll(tc.name, " ", "-"), &failingReader{}, tc.opts); !errors.Is(err, errSource) {
				t.Errorf("write of a new object from a failing source: %v, want the source's error", err)
			}
			if tc.opts.IfAbsent {
				return
			}
			if _, err := s.Write(ctx, "existing", &failingReader{}, tc.opts); !errors.Is(err, errSource) {
				t.Errorf("overwrite from a failing source: %v, want the source's error", err)
			}
		})
	}
	if got := names(list(t, s, "", "")); !slices.Equal(got, []string{"existing"}) {
		t.Errorf("after failed writes list = %q, want [existing]", got)
	}
	if got := read(t, s, "existing"); got != "old" {
		t.Errorf("after a failed overwrite read %q, want old", got)
	}
}

// listNames are stored with their own name as content. They are chosen so
// that a directory walk order differs from byte order: '-' < '.' < '/' < '0'.
var listNames = []string{"a-b", "a.b", "a/b-c", "a/b/c", "a/b0", "a/c", "a0", "ab/x", "b"}

func testList(t *testing.T, s objstore.Store) {
	if got := list(t, s, "", ""); len(got) != 0 {
		t.Errorf("list of an empty store = %q", names(got))
	}
	for _, i := range []int{5, 1, 8, 3, 0, 7, 2, 6, 4} {
		write(t, s, listNames[i], listNames[i])
	}
	tests := []struct {
		name            string
		prefix, startAt string
		want            []string
	}{
		{"everything", "", "", listNames},
		{"a directory prefix", "a/", "", []string{"a/b-c", "a/b/c", "a/b0", "a/c"}},
		{"a partial-name prefix", "a/b", "", []string{"a/b-c", "a/b/c", "a/b0"}},
		{"a one-letter prefix", "a", "", []string{"a-b", "a.b", "a/b-c", "a/b/c", "a/b0", "a/c", "a0", "ab/x"}},
		{"a nested directory prefix", "a/b/", "", []string{"a/b/c"}},
		{"a prefix that is a sibling's stem", "ab", "", []string{"ab/x"}},
		{"a prefix matching nothing", "zzz", "", nil},
		{"a prefix equal to a whole name", "a/c", "", []string{"a/c"}},
		{"startAt an existing name includes it", "", "a/b0", []string{"a/b0", "a/c", "a0", "ab/x", "b"}},
		{"startAt between names", "", "a/b/", []string{"a/b/c", "a/b0", "a/c", "a0", "ab/x", "b"}},
		{"startAt within a prefix", "a/", "a/b0", []string{"a/b0", "a/c"}},
		{"startAt before the prefix", "a/", "a", []string{"a/b-c", "a/b/c", "a/b0", "a/c"}},
		{"startAt past everything", "", "c", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := list(t, s, tc.prefix, tc.startAt)
			if !slices.Equal(names(got), tc.want) {
				t.Fatalf("list(%q, %q) = %q, want %q", tc.prefix, tc.startAt, names(got), tc.want)
			}
			for _, info := range got {
				if info.Size != int64(len(info.Name)) || info.Generation <= 0 || info.Updated.IsZero() {
					t.Errorf("list info %+v: want size %d, generation > 0, Updated set", info, len(info.Name))
				}
			}
		})
	}
	t.Run("a prefix that climbs out of the root is rejected", func(t *testing.T) {
		err := s.List(t.Context(), "../", "", func(objstore.Info) error { return nil })
		if !errors.Is(err, objstore.ErrInvalidName) {
			t.Errorf("list ../: %v, want ErrInvalidName", err)
		}
	})
}

func testListStops(t *testing.T, s objstore.Store) {
	for _, name := range []string{"x/1", "x/2", "x/3"} {
		write(t, s, name, name)
	}
	stop := errors.New("stop")
	var seen []string
	err := s.List(t.Context(), "x/", "", func(info objstore.Info) error {
		seen = append(seen, info.Name)
		if len(seen) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("list returned %v, want the callback's error", err)
	}
	if !slices.Equal(seen, []string{"x/1", "x/2"}) {
		t.Errorf("callback saw %q, want [x/1 x/2]", seen)
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, name := range []string{"t/a/b/c", "t/a/b0", "t/z"} {
		write(t, s, name, name)
	}
	if err := s.Delete(ctx, "t/a/b/c"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.Stat(ctx, "t/a/b/c"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("Stat after delete: %v, want ErrNotExist", err)
	}
	if _, err := objstore.ReadAll(ctx, s, "t/a/b/c"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("read after delete: %v, want ErrNotExist", err)
	}
	if err := s.Delete(ctx, "t/a/b/c"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("second delete: %v, want ErrNotExist", err)
	}
	if got := names(list(t, s, "", "")); !slices.Equal(got, []string{"t/a/b0", "t/z"}) {
		t.Errorf("list after delete = %q, want [t/a/b0 t/z]", got)
	}
	// The emptied "directory" must be writable again, as a name or a prefix.
	write(t, s, "t/a/b", "now an object")
	if got := read(t, s, "t/a/b"); got != "now an object" {
		t.Errorf("read t/a/b = %q", got)
	}
}

var invalidNames = []struct{ why, name string }{
	{"empty", ""},
	{"absolute", "/etc/passwd"},
	{"parent segment", "../outside"},
	{"parent segment inside", "a/../../outside"},
	{"trailing parent segment", "a/.."},
	{"dot segment", "a/./b"},
	{"leading dot segment", "./a"},
	{"empty segment", "a//b"},
	{"trailing slash", "a/"},
	{"backslash", `a\..\..\b`},
	{"NUL", "a\x00b"},
	{"line feed", "a\nb"},
	{"invalid UTF-8", "a\xffb"},
	{"too long", strings.Repeat("n", 1025)},
}

func testInvalidNames(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, tc := range invalidNames {
		t.Run(tc.why, func(t *testing.T) {
			if err := objstore.ValidName(tc.name); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("ValidName(%q) = %v, want ErrInvalidName", tc.name, err)
			}
			if _, err := objstore.WriteBytes(ctx, s, tc.name, []byte("x"), objstore.WriteOptions{}); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("Write: %v, want ErrInvalidName", err)
			}
			if _, err := objstore.WriteBytes(ctx, s, tc.name, []byte("x"), objstore.WriteOptions{IfAbsent: true}); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("Write IfAbsent: %v, want ErrInvalidName", err)
			}
			if _, err := s.Stat(ctx, tc.name); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("Stat: %v, want ErrInvalidName", err)
			}
			if rc, err := s.NewReader(ctx, tc.name, 0, -1); !errors.Is(err, objstore.ErrInvalidName) {
				if err == nil {
					rc.Close()
				}
				t.Errorf("NewReader: %v, want ErrInvalidName", err)
			}
			if err := s.Delete(ctx, tc.name); !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("Delete: %v, want ErrInvalidName", err)
			}
		})
	}
	if got := list(t, s, "", ""); len(got) != 0 {
		t.Errorf("rejected writes stored %q", names(got))
	}
}

func testValidNames(t *testing.T, s objstore.Store) {
	valid := []string{"a b", ".hidden", "_delta_log/.00000000000000000000.json.crc", "a..b", "..a", "ünïcødé/日本", "x=1/part-0.parquet", strings.Repeat("n", 200)}
	for _, name := range valid {
		if err := objstore.ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", name, err)
			continue
		}
		write(t, s, name, name)
		if got := read(t, s, name); got != name {
			t.Errorf("read %q = %q", name, got)
		}
	}
	want := slices.Clone(valid)
	slices.Sort(want)
	if got := names(list(t, s, "", "")); !slices.Equal(got, want) {
		t.Errorf("list = %q, want %q", got, want)
	}
}

func testSub(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	// Siblings sharing the prefix as a string must stay outside the view.
	write(t, s, "t1-a", "outside")
	write(t, s, "t10/z", "outside")
	write(t, s, "t0", "outside")
	sub := objstore.Sub(s, "t1")
	info, err := objstore.WriteBytes(ctx, sub, "x/y", []byte("inside"), objstore.WriteOptions{IfAbsent: true})
	if err != nil {
		t.Fatalf("write through the view: %v", err)
	}
	if info.Name != "x/y" {
		t.Errorf("write info name %q, want x/y", info.Name)
	}
	write(t, sub, "a", "inside")
	if got := read(t, s, "t1/x/y"); got != "inside" {
		t.Errorf("parent read t1/x/y = %q", got)
	}
	if got := stat(t, sub, "x/y"); got.Name != "x/y" || got.Size != 6 {
		t.Errorf("Stat through the view = %+v", got)
	}
	if got := names(list(t, sub, "", "")); !slices.Equal(got, []string{"a", "x/y"}) {
		t.Errorf("list of the view = %q, want [a x/y]", got)
	}
	if got := names(list(t, sub, "", "b")); !slices.Equal(got, []string{"x/y"}) {
		t.Errorf("list of the view from b = %q, want [x/y]", got)
	}
	if got := names(list(t, sub, "x/", "")); !slices.Equal(got, []string{"x/y"}) {
		t.Errorf("list of the view with prefix x/ = %q, want [x/y]", got)
	}
	if _, err := objstore.WriteBytes(ctx, sub, "x/y", []byte("again"), objstore.WriteOptions{IfAbsent: true}); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("second create through the view: %v, want ErrExists", err)
	}
	nested := objstore.Sub(sub, "x/")
	if got := read(t, nested, "y"); got != "inside" {
		t.Errorf("nested view read y = %q", got)
	}
	if got, want := nested.URL(), strings.TrimSuffix(s.URL(), "/")+"/t1/x"; got != want {
		t.Errorf("nested view URL = %q, want %q", got, want)
	}
	if _, err := sub.Stat(ctx, "../t0"); !errors.Is(err, objstore.ErrInvalidName) {
		t.Errorf("Stat ../t0 through the view: %v, want ErrInvalidName", err)
	}
	if err := sub.Delete(ctx, "x/y"); err != nil {
		t.Fatalf("delete through the view: %v", err)
	}
	if _, err := s.Stat(ctx, "t1/x/y"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("parent Stat after delete through the view: %v", err)
	}
}

func testReaderAt(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	// Larger than the read-ahead so that both cached and direct reads happen.
	data := make([]byte, 700<<10+123)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.WriteBytes(ctx, s, "data.parquet", data, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	ra := objstore.NewReaderAt(ctx, s, "data.parquet", size)
	tests := []struct {
		name    string
		off     int64
		n       int
		wantN   int
		wantEOF bool
	}{
		{"the 8-byte tail", size - 8, 8, 8, false},
		{"a footer before the tail", size - 5000, 4992, 4992, false},
		{"the first bytes", 0, 4, 4, false},
		{"a small read in the middle", 300 << 10, 4096, 4096, false},
		{"a read larger than the read-ahead", 10, 500 << 10, 500 << 10, false},
		{"a read across the end", size - 10, 100, 10, true},
		{"a read at the end", size, 10, 0, true},
		{"a read past the end", size + 100, 10, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.n)
			n, err := ra.ReadAt(p, tc.off)
			if n != tc.wantN {
				t.Errorf("ReadAt(%d bytes at %d) n = %d, want %d", tc.n, tc.off, n, tc.wantN)
			}
			if tc.wantEOF && err != io.EOF {
				t.Errorf("ReadAt err = %v, want io.EOF", err)
			}
			if !tc.wantEOF && err != nil {
				t.Errorf("ReadAt err = %v", err)
			}
			if tc.off < size && !bytes.Equal(p[:n], data[tc.off:tc.off+int64(n)]) {
				t.Errorf("ReadAt(%d bytes at %d) returned wrong bytes", tc.n, tc.off)
			}
		})
	}
	t.Run("concurrent reads see the right bytes", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := range 20 {
					off := int64((g*7919 + i*104729) % int(size-3000))
					p := make([]byte, 1000+i*100)
					n, err := ra.ReadAt(p, off)
					if err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) || n != len(p) {
						errs <- fmt.Errorf("ReadAt(%d at %d) = %d, %v (bytes equal %v)", len(p), off, n, err, bytes.Equal(p[:n], data[off:off+int64(n)]))
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	t.Run("a section reader reads the whole object", func(t *testing.T) {
		got, err := io.ReadAll(io.NewSectionReader(ra, 0, size))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("section read: %d bytes, %v; equal %v", len(got), err, bytes.Equal(got, data))
		}
	})
}

func testClosed(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	write(t, s, "v/obj", "x")
	view := objstore.Sub(s, "v")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, tc := range []struct {
		name string
		s    objstore.Store
		obj  string
	}{{"the store", s, "v/obj"}, {"a view of it", view, "obj"}} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.s.Stat(ctx, tc.obj); !errors.Is(err, objstore.ErrClosed) {
				t.Errorf("Stat: %v, want ErrClosed", err)
			}
			if rc, err := tc.s.NewReader(ctx, tc.obj, 0, -1); !errors.Is(err, objstore.ErrClosed) {
				if err == nil {
					rc.Close()
				}
				t.Errorf("NewReader: %v, want ErrClosed", err)
			}
			if _, err := objstore.WriteBytes(ctx, tc.s, tc.obj, []byte("y"), objstore.WriteOptions{}); !errors.Is(err, objstore.ErrClosed) {
				t.Errorf("Write: %v, want ErrClosed", err)
			}
			if err := tc.s.List(ctx, "", "", func(objstore.Info) error { return nil }); !errors.Is(err, objstore.ErrClosed) {
				t.Errorf("List: %v, want ErrClosed", err)
			}
			if err := tc.s.Delete(ctx, tc.obj); !errors.Is(err, objstore.ErrClosed) {
				t.Errorf("Delete: %v, want ErrClosed", err)
			}
		})
	}
	if err := s.Close(); !errors.Is(err, objstore.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// raceWriters is how many goroutines race for one name.
const raceWriters = 16

func testIfAbsentRace(t *testing.T, s objstore.Store) {
	// Several rounds: a check-then-create bug loses only some races.
	for round := range 8 {
		name := fmt.Sprintf("_delta_log/%020d.json", round)
		winners := race(t, raceWriters, func(ctx context.Context, i int) error {
			_, err := objstore.WriteBytes(ctx, s, name, []byte(fmt.Sprintf("writer %d", i)), objstore.WriteOptions{IfAbsent: true})
			return err
		}, objstore.ErrExists)
		checkOneWinner(t, s, name, winners)
	}
}

func testGenerationRace(t *testing.T, s objstore.Store) {
	for round := range 5 {
		name := fmt.Sprintf("_last_checkpoint-%d", round)
		g := write(t, s, name, "initial").Generation
		winners := race(t, raceWriters, func(ctx context.Context, i int) error {
			_, err := objstore.WriteBytes(ctx, s, name, []byte(fmt.Sprintf("writer %d", i)), objstore.WriteOptions{IfGenerationMatch: g})
			return err
		}, objstore.ErrPrecondition)
		checkOneWinner(t, s, name, winners)
	}
}

// race runs n writers at once and returns the indexes of those that
// succeeded; every failure must be loserErr.
func race(t *testing.T, n int, writer func(ctx context.Context, i int) error, loserErr error) []int {
	t.Helper()
	ctx := t.Context()
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = writer(ctx, i)
		})
	}
	close(start)
	wg.Wait()
	var winners []int
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case !errors.Is(err, loserErr):
			t.Errorf("writer %d: %v, want success or %v", i, err, loserErr)
		}
	}
	return winners
}

func checkOneWinner(t *testing.T, s objstore.Store, name string, winners []int) {
	t.Helper()
	if len(winners) != 1 {
		t.Fatalf("%s: writers %v succeeded, want exactly one", name, winners)
	}
	if got, want := read(t, s, name), fmt.Sprintf("writer %d", winners[0]); got != want {
		t.Errorf("%s holds %q, want the winner's %q", name, got, want)
	}
}

func testCopy(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	from, to := objstore.Sub(s, "staging/t"), objstore.Sub(s, "db/t_log")
	content := strings.Repeat("parquet bytes ", 1000)
	write(t, from, "part-0.parquet", content)
	absent := objstore.WriteOptions{IfAbsent: true, ContentType: "application/vnd.apache.parquet"}
	info, err := objstore.Copy(ctx, from, "part-0.parquet", to, "d=2026-01-05/part-00000.parquet", absent)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if info.Name != "d=2026-01-05/part-00000.parquet" || info.Size != int64(len(content)) || info.Generation <= 0 {
		t.Errorf("copy info = %+v", info)
	}
	if got := read(t, s, "db/t_log/d=2026-01-05/part-00000.parquet"); got != content {
		t.Errorf("the copy reads %d bytes, want the source's %d", len(got), len(content))
	}
	if got := read(t, from, "part-0.parquet"); got != content {
		t.Error("the source changed")
	}
	// A second copy to the same name with IfAbsent is not asserted here:
	// fake-gcs-server v1.56.1 ignores the preconditions of a rewrite
	// (fakestorage/object.go, rewriteObject creates with
	// backend.NoConditions), which GCS honors (ifGenerationMatch=0). The
	// stores that copy by a write enforce it as testIfAbsent checks.
	if _, err := objstore.Copy(ctx, from, "missing.parquet", to, "x.parquet", absent); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("copy of a missing object: %v, want ErrNotExist", err)
	}
	if _, err := objstore.Copy(ctx, from, "part-0.parquet", to, "../escape", absent); !errors.Is(err, objstore.ErrInvalidName) {
		t.Errorf("copy to an invalid name: %v, want ErrInvalidName", err)
	}
	// Into another store: read and written.
	other := objstore.NewMemory()
	if _, err := objstore.Copy(ctx, from, "part-0.parquet", other, "p.parquet", absent); err != nil {
		t.Fatalf("copy to another store: %v", err)
	}
	if got := read(t, other, "p.parquet"); got != content {
		t.Error("the copy to another store differs")
	}
}
